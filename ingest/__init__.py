import infra.logs  # noqa: F401  (its import gives the project's loggers their handler: infra.logs.project_lines)
