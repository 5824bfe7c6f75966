"""A WordNet-3.0-format dictionary for the demo world: the semantic network DSBATS-sn reads.

``write_wordnet(world, out_dir, rng)`` writes ``out_dir/dict/`` in the format
of wndb(5WN), as NLTK's ``WordNetCorpusReader`` reads it: ``data.{noun,verb,
adj,adv}`` (the 29-line license header, then one synset a line whose first
field is its own byte offset), ``index.*`` (one lemma a line, byte-sorted),
``*.exc``, ``lexnames`` and ``index.sense``. It holds:

- a small handwritten English lexicon (:data:`NOUNS`, :data:`VERBS`,
  :data:`ADJECTIVES`): hypernym chains (dog -> canine -> carnivore -> mammal
  -> vertebrate -> animal -> organism -> ... -> entity), substance, member and
  part meronyms (:data:`SUBSTANCES`, :data:`MEMBERS`, :data:`PARTS`), animal
  sounds as verbs with their noun senses (:data:`SOUNDS`), gradable antonyms
  with similar-to satellites and attribute nouns;
- the world's named entities as instance synsets (capitalised lemmas, ``@i``):
  its regions, countries (part holonym of their region, part meronyms: their
  cities), cities (part holonym: their country), people with an article
  (instances of their occupation) and the demonym adjectives (pertainyms of
  their country);
- three distractor senses DSBATS-sn's filters must drop (:data:`DISTRACTORS`):
  ``Crow`` (a people: capitalised, not an instance), ``Lion`` (a brand of a
  world company's product: a named entity) and ``duck`` "a score of nothing"
  (a rare sense of degree 1). They come after the word's main senses.

Every pointer has its reverse (``@``/``~``, ``@i``/``~i``, ``#m``/``%m``, ...)
except pertainyms, as in WordNet. Glosses are lower-case definitions for the
lexicon and fact sentences for the world's entities. Only ``rng`` (pass
``random.Random(f"wordnet-{seed}")``) picks anything: same seed, same bytes.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

from structcse.demo.world import World

LEXNAMES = ("adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
            "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
            "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
            "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
            "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
            "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather "
            "adj.ppl").split()

# noun key (its first lemma), lexicographer file (without "noun."), lemmas, hypernym key, gloss
NOUNS = tuple(tuple(row.split("|")) for row in """\
entity|Tops|entity||that which is perceived or known or inferred to have its own distinct existence
physical_entity|Tops|physical_entity|entity|an entity that has physical existence
abstraction|Tops|abstraction,abstract_entity|entity|a general concept formed by extracting common features from specific examples
object|Tops|object,physical_object|physical_entity|a tangible and visible entity; an entity that can cast a shadow
matter|Tops|matter|physical_entity|that which has mass and occupies space
living_thing|Tops|living_thing,animate_thing|object|a living (or once living) entity
organism|Tops|organism,being|living_thing|a living thing that has (or can develop) the ability to act or function independently
animal|animal|animal,animate_being,beast,creature,fauna|organism|a living organism characterized by voluntary movement
person|person|person,individual,someone|organism|a human being
vertebrate|animal|vertebrate,craniate|animal|animals having a bony or cartilaginous skeleton with a segmented spinal column and a skull
invertebrate|animal|invertebrate|animal|any animal lacking a backbone or notochord
mammal|animal|mammal,mammalian|vertebrate|any warm-blooded vertebrate having the skin more or less covered with hair; young are nourished with milk
bird|animal|bird|vertebrate|warm-blooded egg-laying vertebrates characterized by feathers and forelimbs modified as wings
reptile|animal|reptile,reptilian|vertebrate|any cold-blooded vertebrate with a scaly skin, such as a snake, lizard or turtle
amphibian|animal|amphibian|vertebrate|a cold-blooded vertebrate that lives on land but breeds in water
fish|animal|fish|vertebrate|any of various cold-blooded aquatic vertebrates having gills and fins
insect|animal|insect|invertebrate|small air-breathing arthropod with six legs and usually two pairs of wings
carnivore|animal|carnivore|mammal|a terrestrial or aquatic flesh-eating mammal
rodent|animal|rodent,gnawer|mammal|relatively small mammals having a single pair of constantly growing incisor teeth for gnawing
ungulate|animal|ungulate,hoofed_mammal|mammal|any of a number of mammals with hooves
canine|animal|canine,canid|carnivore|any of various mammals with nonretractile claws and typically long muzzles
feline|animal|feline,felid|carnivore|any of various lithe-bodied roundheaded mammals, many with retractile claws
dog|animal|dog,domestic_dog|canine|a domesticated carnivore kept as a pet or for hunting that is descended from the wolf
wolf|animal|wolf|canine|any of various predatory carnivorous canines that hunt in packs
fox|animal|fox|canine|alert carnivorous mammal with pointed muzzle and ears and a bushy tail
cat|animal|cat,true_cat|feline|feline mammal usually having thick soft fur and no ability to roar
lion|animal|lion,king_of_beasts|feline|large gregarious predatory cat that lives in prides on open grassland
tiger|animal|tiger|feline|large solitary striped cat of the forests
mouse|animal|mouse|rodent|any of numerous small rodents having pointed snouts and small ears
rat|animal|rat|rodent|any of various long-tailed rodents similar to but larger than a mouse
beaver|animal|beaver|rodent|large semiaquatic rodent with webbed hind feet and a broad flat tail that builds dams
horse|animal|horse,equine|ungulate|solid-hoofed herbivorous quadruped domesticated since prehistoric times
cow|animal|cow,kine|ungulate|a domesticated bovine animal kept for its milk and meat
sheep|animal|sheep|ungulate|woolly usually horned ruminant mammal
goat|animal|goat,caprine_animal|ungulate|any of numerous agile ruminants related to sheep but having a beard and straight horns
pig|animal|pig,hog,swine|ungulate|domestic swine kept for its meat
donkey|animal|donkey,domestic_ass|ungulate|domestic beast of burden descended from the wild ass
duck|animal|duck|bird|small web-footed broad-billed swimming bird usually having a depressed body and short legs
owl|animal|owl,bird_of_night|bird|nocturnal bird of prey with hawk-like beak and claws and large head with front-facing eyes
crow|animal|crow|bird|black birds having a raucous call
eagle|animal|eagle|bird|any of various large keen-sighted birds of prey noted for their broad wings and soaring flight
snake|animal|snake,serpent,ophidian|reptile|limbless scaly elongate reptile; some are venomous
lizard|animal|lizard|reptile|relatively long-bodied reptile with usually two pairs of legs and a tapering tail
frog|animal|frog,toad|amphibian|any of various tailless stout-bodied amphibians with long hind limbs for leaping
bee|animal|bee|insect|any of numerous hairy-bodied insects including social and solitary species
ant|animal|ant,emmet,pismire|insect|social insect living in organized colonies
fly|animal|fly|insect|two-winged insects characterized by active flight
salmon|animal|salmon|fish|any of various large food and game fishes of northern waters
group|group|group,grouping|abstraction|any number of entities (members) considered as a unit
pack|group|pack|group|a group of hunting animals
flock|group|flock|group|a group of birds or of sheep moving or feeding together
herd|group|herd|group|a group of cattle or other domestic mammals all of the same kind that are herded by humans
pride|group|pride|group|a family of lions
swarm|group|swarm,cloud|group|a group of many insects flying together
colony|group|colony|group|a group of organisms of the same type living or growing together
school|group|school,shoal|group|a large group of fish swimming together
body_part|body|body_part|object|any part of an organism such as an organ or extremity
wing|body|wing|body_part|a movable organ for flying
beak|body|beak,bill,neb|body_part|horny projecting mouth of a bird
feather|body|feather,plume|body_part|the light horny waterproof structure forming the external covering of birds
tail|body|tail|body_part|the posterior part of the body of a vertebrate, especially when elongated
paw|body|paw|body_part|a clawed foot of an animal, especially a quadruped
fin|body|fin|body_part|a thin flattened organ of a fish used for propulsion and balance
gill|body|gill,branchia|body_part|respiratory organ of aquatic animals that breathe oxygen dissolved in water
hoof|body|hoof|body_part|the horny covering of the foot of an ungulate mammal
mane|body|mane|body_part|long coarse hair growing from the crest of the neck of an animal
artifact|artifact|artifact,artefact|object|a man-made object taken as a whole
car|artifact|car,auto,automobile,motorcar|artifact|a motor vehicle with four wheels, usually propelled by an internal combustion engine
engine|artifact|engine|artifact|motor that converts thermal energy to mechanical work
wheel|artifact|wheel|artifact|a simple machine consisting of a circular frame or disc that can rotate on an axle
house|artifact|house|artifact|a dwelling that serves as living quarters for one or more families
roof|artifact|roof|artifact|a protective covering that covers or forms the top of a building
door|artifact|door|artifact|a swinging or sliding barrier that will close the entrance to a room or building
window|artifact|window|artifact|a framework that holds a pane of glass and is built into a wall to admit light or air
bottle|artifact|bottle|artifact|a glass or plastic vessel used for storing drinks or other liquids
table|artifact|table|artifact|a piece of furniture having a smooth flat top that is usually supported by vertical legs
candle|artifact|candle,taper|artifact|stick of wax with a wick in the middle
coin|artifact|coin|artifact|a flat metal piece (usually a disc) used as money
jeans|artifact|jeans,blue_jean|artifact|close-fitting trousers of heavyweight denim for manual work or casual wear
bag|artifact|bag|artifact|a flexible container with a single opening
material|substance|material,stuff|matter|the tangible substance that goes into the makeup of a physical object
food|food|food,nutrient|matter|any substance that can be metabolized by an animal to give energy and build tissue
glass|substance|glass|material|a brittle transparent solid with irregular atomic structure
plastic|substance|plastic|material|a synthetic material that can be moulded or extruded into objects or films
wood|substance|wood|material|the hard fibrous substance under the bark of trees
metal|substance|metal,metallic_element|material|any of several chemical elements that are usually shiny solids and conduct heat and electricity
leather|substance|leather|material|an animal skin made smooth and flexible by removing the hair and tanning
denim|substance|denim,dungaree|material|a coarse durable twill-weave cotton fabric
wax|substance|wax|material|any of various substances that are soft and malleable when warm
cellulose|substance|cellulose|material|a polysaccharide that is the chief constituent of all plant tissues and fibres
water|substance|water|matter|a clear colorless odorless tasteless liquid essential for most plant and animal life
salt|substance|salt,table_salt,common_salt|matter|white crystalline substance used to season and preserve food
ice|substance|ice,water_ice|matter|water frozen in the solid state
snow|substance|snow|matter|precipitation falling from clouds in the form of ice crystals
paper|substance|paper|material|a material made of cellulose pulp derived mainly from wood or rags
flour|food|flour|food|fine powdery foodstuff obtained by grinding and sifting the meal of a cereal grain
milk|food|milk|food|a white nutritious liquid secreted by mammals and used as food by human beings
bread|food|bread,breadstuff|food|food made from dough of flour or meal, usually raised with yeast and baked
cheese|food|cheese|food|a solid food prepared from the pressed curd of milk
noise|phenomenon|noise|physical_entity|sound of any kind, especially unintelligible or dissonant sound
cry|communication|cry,call|noise|the characteristic utterance of an animal
attribute|attribute|attribute|abstraction|an abstraction belonging to or characteristic of an entity
location|location|location|physical_entity|a point or extent in space
region|location|region|location|a large indefinite location on the surface of the earth
country|location|country,state,land|region|the territory occupied by a nation
city|location|city,metropolis,urban_center|region|a large and densely populated urban area
national_capital|location|national_capital|city|the capital city of a nation
brand|communication|brand,brand_name,trade_name|abstraction|a name given to a product or service
score|communication|score|abstraction|a number that expresses the accomplishment of a team or an individual in a game
founder|person|founder,founding_father|person|a person who founds or establishes some institution
entrepreneur|person|entrepreneur,enterpriser|person|someone who organizes a business venture and assumes the risk for it
engineer|person|engineer,applied_scientist|person|a person who uses scientific knowledge to solve practical problems
business_executive|person|business_executive|person|a person responsible for the administration of a business
economist|person|economist,economic_expert|person|an expert in the science of economics
investor|person|investor|person|someone who commits capital in order to gain financial returns
chemist|person|chemist|person|a scientist who specializes in chemistry""".split("\n"))

# verb key, lexicographer file, lemmas, hypernym key, gloss (animal sounds: frame 1 "Something ----s")
VERBS = tuple(tuple(row.split("|")) for row in """\
make_noise|perception|make_noise,resound,noise||emit a noise
bark|perception|bark|make_noise|make barking sounds, as of a dog
growl|perception|growl,grumble,rumble|make_noise|to utter or emit low dull rumbling sounds
howl|perception|howl,wrawl,yowl|make_noise|emit long loud cries
meow|perception|meow,mew|make_noise|cry like a cat
purr|perception|purr|make_noise|make a low vibrating sound, as of a contented cat
moo|perception|moo,low|make_noise|make a low noise, characteristic of bovines
bleat|perception|bleat,baa|make_noise|cry plaintively, like a sheep or a goat
quack|perception|quack|make_noise|utter quacking noises, as of a duck
roar|perception|roar|make_noise|make a loud deep noise, as of a large animal
neigh|perception|neigh,whinny,nicker|make_noise|make a characteristic sound, of a horse
oink|perception|oink|make_noise|make a grunting sound, as of a pig
grunt|perception|grunt|make_noise|issue a grunting, low, animal-like noise
hoot|perception|hoot|make_noise|utter the characteristic sound of owls
hiss|perception|hiss,siss,sibilate|make_noise|make a sharp sound like that of a prolonged s
buzz|perception|buzz,hum,bombinate|make_noise|make a buzzing sound, as of an insect in flight
squeak|perception|squeak,squeal|make_noise|make a high-pitched, screeching noise
croak|perception|croak,crock|make_noise|utter a hoarse sound, like a frog
caw|perception|caw|make_noise|utter a cry, characteristic of crows and ravens
bray|perception|bray|make_noise|braying characteristic of donkeys""".split("\n"))

# attribute noun, then each pole: (lemmas, gloss), then its satellites: ((lemmas, gloss), ...)
ADJECTIVES = (
    ("temperature|the degree of hotness or coldness of a body or environment",
     ("hot", "having a high or higher than desirable temperature or giving off heat"), (("torrid", "extremely hot"),),
     ("cold", "having a low or inadequate temperature"), (("chilly,frosty", "uncomfortably cool"),)),
    ("size|the physical magnitude of something (how big it is)",
     ("big,large", "above average in size or number or quantity or magnitude or extent"), (),
     ("small,little", "limited or below average in number or quantity or magnitude or extent"),
     (("tiny,diminutive,bantam", "very small"),)),
    ("speed,velocity|distance travelled per unit time",
     ("fast", "acting or moving or capable of acting or moving quickly"),
     (("rapid,speedy", "characterized by speed; moving with or capable of moving with high speed"),),
     ("slow", "not moving quickly; taking a comparatively long time"), ()),
    ("strength|the property of being physically or mentally strong",
     ("strong", "having strength or power greater than average or expected"), (),
     ("weak", "wanting in physical strength"), (("feeble", "lacking strength or vigor"),)),
    ("price,cost|the property of having material worth",
     ("cheap,inexpensive", "relatively low in price or charging low prices"), (),
     ("expensive", "high in price or charging high prices"),
     (("costly,dear,pricey", "having a high price"),)),
    ("wetness|the property of being wet", ("dry", "free from liquid or moisture"), (),
     ("wet", "covered or soaked with a liquid such as water"), (("damp,moist", "slightly wet"),)),
    ("cleanness|the state of being clean", ("clean", "free from dirt or impurities"), (),
     ("dirty,soiled,unclean", "soiled or likely to soil with dirt or grime"),
     (("filthy,foul", "disgustingly dirty; filled or smeared with offensive matter"),)),
    ("fullness|the condition of being filled to capacity",
     ("full", "containing as much or as many as is possible or normal"), (),
     ("empty", "holding or containing nothing"), (("vacant", "without an occupant or contents"),)),
    ("weight|the vertical force exerted by a mass as a result of gravity",
     ("heavy", "of comparatively great physical weight or density"), (),
     ("light", "of comparatively little physical weight or density"), ()),
    ("length|the linear extent in space from one end to the other",
     ("long", "of relatively great or greater than average spatial extension"), (),
     ("short", "having little length or lacking in length"), ()),
    ("age|how long something has existed", ("old", "having lived for a relatively long time"), (),
     ("young,immature", "in an early period of life or development or growth"), ()),
    ("wealth|the state of being rich and affluent", ("rich", "possessing material wealth"), (),
     ("poor", "having little money or few possessions"), ()),
)
# adverbs: lemmas, the adjective they derive from (a pertainym), gloss
ADVERBS = (("fast,quickly,rapidly", "fast", "with rapid movements"), ("slowly,slow", "slow", "without speed"))

SOUNDS = {"cat": "meow purr", "cow": "moo", "crow": "caw", "dog": "bark growl howl", "donkey": "bray",
          "duck": "quack", "fly": "buzz", "frog": "croak", "goat": "bleat", "horse": "neigh", "lion": "roar growl",
          "mouse": "squeak", "owl": "hoot", "pig": "oink grunt", "rat": "squeak", "sheep": "bleat", "snake": "hiss",
          "tiger": "roar growl", "wolf": "howl", "bee": "buzz"}
SUBSTANCES = {"bag": "leather plastic", "bottle": "glass plastic", "bread": "flour", "candle": "wax", "cheese": "milk",
              "coin": "metal", "ice": "water", "jeans": "denim", "paper": "cellulose wood", "snow": "water",
              "table": "wood", "window": "glass"}
MEMBERS = {"ant": "colony", "bee": "swarm colony", "cow": "herd", "crow": "flock", "dog": "pack", "duck": "flock",
           "fly": "swarm", "goat": "herd", "horse": "herd", "lion": "pride", "salmon": "school", "sheep": "flock herd",
           "wolf": "pack"}
PARTS = {"bird": "wing beak feather tail", "car": "engine wheel", "cat": "paw tail", "fish": "fin gill tail",
         "horse": "hoof mane tail", "house": "roof door window", "lion": "mane paw"}
# word -> what each distractor sense is (the filter that must drop it)
DISTRACTORS = {"crow": "capitalised", "lion": "named_entity", "duck": "low_degree"}

REVERSE = {"@": "~", "~": "@", "@i": "~i", "~i": "@i", "#m": "%m", "%m": "#m", "#s": "%s", "%s": "#s", "#p": "%p",
           "%p": "#p", "!": "!", "&": "&", "=": "=", "+": "+", ";r": "-r", "-r": ";r"}
# the order grind lists pointer symbols in index files (its internal pointer numbering)
INDEX_ORDER = ("!", "@", "~", "*", "&", "#m", "#s", "#p", "%m", "%s", "%p", ">", "<", "^", "\\", "=", "$", "+", ";", "-")
FILES = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
POS_LETTER = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
SS_NUMBER = {"n": 1, "v": 2, "a": 3, "r": 4, "s": 5}


class Synset:
    def __init__(self, pos: str, lexname: str, words: list[str], gloss: str, frames: str = ""):
        self.pos, self.lexnum, self.words, self.gloss, self.frames = pos, LEXNAMES.index(lexname), words, gloss, frames
        self.pointers: list[tuple[str, Synset, int, int]] = []  # symbol, target, source lemma, target lemma (0: all)
        self.offset = 0
        self.lex_ids: list[int] = []


class Network:
    """Synsets in the order they are added, which is also every lemma's sense order."""

    def __init__(self):
        self.synsets: list[Synset] = []
        self.lex_ids: dict = defaultdict(int)

    def add(self, pos, lexname, words, gloss, frames="") -> Synset:
        synset = Synset(pos, lexname, [w.replace(" ", "_") for w in words], gloss, frames)
        for word in synset.words:
            key = (word.lower(), synset.lexnum)
            synset.lex_ids.append(self.lex_ids[key] % 16)
            self.lex_ids[key] += 1
        self.synsets.append(synset)
        return synset

    @staticmethod
    def link(a: Synset, symbol: str, b: Synset, lemmas: tuple[int, int] = (0, 0)) -> None:
        a.pointers.append((symbol, b, *lemmas))
        if symbol in REVERSE:
            b.pointers.append((REVERSE[symbol], a, lemmas[1], lemmas[0]))


def _third(verb: str) -> str:
    return verb + ("es" if verb.endswith(("s", "z", "sh", "ch", "x")) else "s")


def _lexicon(net: Network) -> dict:
    """The English lexicon: returns ``{(pos, key): Synset}``."""
    ss = {}
    for key, lexname, words, hyper, gloss in NOUNS:
        ss["n", key] = net.add("n", f"noun.{lexname}", words.split(","), gloss)
        if hyper:
            net.link(ss["n", key], "@", ss["n", hyper])
    for key, lexname, words, hyper, gloss in VERBS:
        ss["v", key] = verb = net.add("v", f"verb.{lexname}", words.split(","), gloss, "01 + 01 00")
        if hyper:
            net.link(verb, "@", ss["v", hyper])
            noun = ss["n", "sound:" + key] = net.add("n", "noun.communication", words.split(",")[:1],
                                                     f"the sound made when an animal or thing {_third(key)}")
            net.link(noun, "@", ss["n", "cry"])
            net.link(verb, "+", noun, (1, 1))
    for attribute, *poles in ADJECTIVES:
        words, gloss = attribute.split("|")
        attr = ss["n", words.split(",")[0]] = net.add("n", "noun.attribute", words.split(","), gloss)
        net.link(attr, "@", ss["n", "attribute"])
        heads = []
        for (words, gloss), satellites in (poles[0:2], poles[2:4]):
            head = ss["a", words.split(",")[0]] = net.add("a", "adj.all", words.split(","), gloss)
            net.link(head, "=", attr)
            for sat_words, sat_gloss in satellites:
                sat = ss["s", sat_words.split(",")[0]] = net.add("s", "adj.all", sat_words.split(","), sat_gloss)
                net.link(sat, "&", head)
                net.link(sat, "+", attr, (1, 1))
            heads.append(head)
        for i in range(min(len(heads[0].words), len(heads[1].words))):
            net.link(heads[0], "!", heads[1], (i + 1, i + 1))
    for words, adjective, gloss in ADVERBS:
        ss["r", words.split(",")[0]] = adverb = net.add("r", "adv.all", words.split(","), gloss)
        adverb.pointers.append(("\\", ss["a", adjective], 1, 1))
    for symbol, table in (("%s", SUBSTANCES), ("#m", MEMBERS), ("%p", PARTS)):
        for word, others in table.items():
            for other in others.split():
                net.link(ss["n", word], symbol, ss["n", other])
    return ss


def _world(net: Network, world: World, ss: dict) -> dict:
    """The world's named entities; returns ``{title: Synset}`` (regions by name, demonyms as ``adj:X``)."""
    named = {}
    for region in sorted({c.region for c in world.countries}):
        members = [c.title for c in world.countries if c.region == region]
        named[region] = net.add("n", "noun.location", [region.removeprefix("the ")],
                                f"a region of {len(members)} countries including {', '.join(members[:3])}")
        net.link(named[region], "@i", ss["n", "region"])
    for country in world.countries:
        form = country.official.split(" of ")[0].lower()
        capital = country.cities[0]
        synset = named[country.title] = net.add(
            "n", "noun.location", [country.title, country.official],
            f"a {form} in {country.region} with about {country.population} people whose capital is {capital.title}")
        net.link(synset, "@i", ss["n", "country"])
        net.link(synset, "#p", named[country.region])
        adjective = named["adj:" + country.title] = net.add(
            "a", "adj.pert", [country.demonym], f"of or relating to {country.title} or its people")
        adjective.pointers.append(("\\", synset, 1, 1))
        native = named["n:" + country.title] = net.add("n", "noun.person", [country.demonym],
                                                       f"a native or inhabitant of {country.title}")
        net.link(native, "@", ss["n", "person"])
        net.link(adjective, "+", native, (1, 1))
    for city in world.cities:
        country = city.country.title
        gloss = (f"the capital of {country}, a {city.adjective} city founded in {city.founded}" if city.is_capital
                 else f"a {city.adjective} city in {country} founded in {city.founded}")
        named[city.title] = net.add("n", "noun.location", [city.title], gloss)
        net.link(named[city.title], "@i", ss["n", "national_capital" if city.is_capital else "city"])
        net.link(named[city.title], "#p", named[country])
    for person in world.people:
        founded = f" who founded {person.founded[0].title}" if person.founded else ""
        gloss = (f"{person.country.demonym} {person.occupation} born in {person.birth_city.title} in "
                 f"{person.birth_year}{founded}")
        named[person.title] = net.add("n", "noun.person", [person.surname, person.title], gloss)
        net.link(named[person.title], "@i", ss["n", person.occupation.replace(" ", "_")])
    return named


def _distractors(net: Network, world: World, ss: dict, named: dict, rng: random.Random) -> None:
    region = rng.choice(sorted({c.region for c in world.countries}))
    crow = net.add("n", "noun.person", ["Crow"], f"a member of a seafaring people of {region}")
    net.link(crow, "@", ss["n", "person"])
    net.link(crow, ";r", named[region])
    company = rng.choice(world.companies)
    lion = net.add("n", "noun.communication", ["Lion"], f"a brand of {company.products[0]} made by {company.title}, "
                   f"a {company.industry.spec.kind} based in {company.city.title}")
    net.link(lion, "@i", ss["n", "brand"])
    net.link(lion, ";r", named[company.country.title])
    duck = net.add("n", "noun.communication", ["duck"], "a score of nothing by a batsman in a game of cricket")
    net.link(duck, "@", ss["n", "score"])


def build_network(world: World, rng: random.Random) -> tuple[Network, dict, dict]:
    """The whole network, offsets set: ``(network, lexicon synsets {(pos, key): Synset}, named {title: Synset})``."""
    net = Network()
    ss = _lexicon(net)
    named = _world(net, world, ss)
    _distractors(net, world, ss, named, rng)
    start = len(_license().encode("utf-8"))
    for name in ("noun", "verb", "adj", "adv"):
        position = start
        for s in (s for s in net.synsets if FILES[s.pos] == name):  # 8-digit offsets: a line's length is fixed
            s.offset = position
            position += len(_data_line(s).encode("utf-8"))
    return net, ss, named


def _license() -> str:
    text = LICENSE_TEXT.split("\n")
    return "".join(f"  {i} {line}  \n" for i, line in enumerate(text, 1))


def _data_line(s: Synset) -> str:
    words = " ".join(f"{w} {i:x}" for w, i in zip(s.words, s.lex_ids))
    ptrs = "".join(f" {sym} {t.offset:08d} {'a' if t.pos == 's' else t.pos} {a:02x}{b:02x}"
                   for sym, t, a, b in s.pointers)
    frames = f" {s.frames}" if s.frames else ""
    return (f"{s.offset:08d} {s.lexnum:02d} {s.pos} {len(s.words):02x} {words} {len(s.pointers):03d}{ptrs}{frames}"
            f" | {s.gloss}  \n")


def _sort_key(text: str) -> bytes:
    return text.encode("utf-8")


def write_wordnet(world: World, out_dir, rng: random.Random) -> Path:
    """Write ``out_dir/dict/`` (created if missing) and return it."""
    net, _, _ = build_network(world, rng)
    folder = Path(out_dir) / "dict"
    folder.mkdir(parents=True, exist_ok=True)
    header = _license()
    index: dict = defaultdict(list)  # (file, lemma) -> synsets
    for s in net.synsets:
        for word in s.words:
            if s not in index[FILES[s.pos], word.lower()]:
                index[FILES[s.pos], word.lower()].append(s)
    senses = []
    for name in ("noun", "verb", "adj", "adv"):
        synsets = [s for s in net.synsets if FILES[s.pos] == name]
        (folder / f"data.{name}").write_bytes((header + "".join(map(_data_line, synsets))).encode("utf-8"))
        lines = []
        for (file, lemma), found in sorted(index.items(), key=lambda item: _sort_key(item[0][1])):
            if file != name:
                continue
            symbols = set()
            for s in found:
                position = [w.lower() for w in s.words].index(lemma) + 1
                symbols |= {sym[0] if sym[0] in "@~;-" else sym for sym, _, a, _ in s.pointers if a in (0, position)}
                head = s.pointers[0][1] if s.pos == "s" else None
                senses.append((f"{lemma}%{SS_NUMBER[s.pos]}:{s.lexnum:02d}:{s.lex_ids[position - 1]:02d}:"
                               + (f"{head.words[0].lower()}:{head.lex_ids[0]:02d}" if head else ":"),
                               s.offset, found.index(s) + 1))
            symbols = sorted(symbols, key=INDEX_ORDER.index)
            lines.append(f"{lemma} {POS_LETTER[name]} {len(found)} {len(symbols)} "
                         + "".join(f"{sym} " for sym in symbols)
                         + f"{len(found)} 0 " + " ".join(f"{s.offset:08d}" for s in found) + "  \n")
        (folder / f"index.{name}").write_bytes((header + "".join(lines)).encode("utf-8"))
    (folder / "index.sense").write_bytes("".join(
        f"{key} {offset:08d} {number} 0\n" for key, offset, number in sorted(senses, key=lambda s: _sort_key(s[0]))
    ).encode("utf-8"))
    (folder / "lexnames").write_text("".join(
        f"{i:02d}\t{name}\t{ {'noun': 1, 'verb': 2, 'adj': 3, 'adv': 4}[name.split('.')[0]]}\n"
        for i, name in enumerate(LEXNAMES)), encoding="utf-8")
    exceptions = {"noun": "mice mouse\nwolves wolf\n", "verb": "hummed hum\nhumming hum\n",
                  "adj": "bigger big\nbiggest big\ndirtier dirty\ndirtiest dirty\nhotter hot\nhottest hot\n"
                         "wetter wet\nwettest wet\n", "adv": "faster fast\nfastest fast\n"}
    for name, text in exceptions.items():
        (folder / f"{name}.exc").write_text(text, encoding="utf-8")
    return folder


LICENSE_TEXT = """\
This software and database is being provided to you, the LICENSEE, by
Princeton University under the following license.  By obtaining, using
and/or copying this software and database, you agree that you have
read, understood, and will comply with these terms and conditions.:

Permission to use, copy, modify and distribute this software and
database and its documentation for any purpose and without fee or
royalty is hereby granted, provided that you agree to comply with
the following copyright notice and statements, including the disclaimer,
and that the same appear on ALL copies of the software, database and
documentation, including modifications that you make for internal
use or for distribution.

WordNet 3.0 Copyright 2006 by Princeton University.  All rights reserved.

THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON
UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES, EXPRESS OR
IMPLIED.  BY WAY OF EXAMPLE, BUT NOT LIMITATION, PRINCETON
UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANT-
ABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR THAT THE USE
OF THE LICENSED SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT
INFRINGE ANY THIRD PARTY PATENTS, COPYRIGHTS, TRADEMARKS OR
OTHER RIGHTS.

The name of Princeton University or Princeton may not be used in
advertising or publicity pertaining to distribution of the software
and/or database.  Title to copyright in this software, database and
any associated documentation shall at all times remain with
Princeton University and LICENSEE agrees to preserve same."""
