"""structcse: knowledge-structured contrastive sentence embeddings on Ray.

``structcse.load(model_dir)`` loads a trained model folder with its method
heads (:func:`train.saved_models.load`); the import of torch and
sentence-transformers happens on the first call.
"""


def load(model_dir, device=None):
    """A :class:`score.model.TrainedModel` for a structcse (or plain SentenceTransformer) folder."""
    from train.saved_models import load as _load

    return _load(model_dir, device=device)


__all__ = ["load"]
