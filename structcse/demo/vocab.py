"""The demo world's fictional vocabulary: industries, name parts, places, occupations.

Every name in the world is drawn from these lists (by :mod:`structcse.demo.world`),
so word lists built from the world's vocabulary can start here.
"""

from __future__ import annotations

from typing import NamedTuple


class IndustrySpec(NamedTuple):
    title: str
    de: str
    sector: str
    kind: str
    kind_wiki: str
    market: str
    suffixes: tuple[str, ...]
    products: tuple[str, ...]


INDUSTRIES = (
    IndustrySpec("Software", "Softwareindustrie", "software", "software company", "[[software]] company",
                 "enterprise software market", ("Systems", "Software", "Labs"),
                 ("database software", "accounting software", "developer tools", "security software")),
    IndustrySpec("Cloud computing", "Cloud Computing", "cloud computing", "cloud computing company",
                 "[[cloud computing]] company", "cloud services market", ("Cloud", "Data", "Networks"),
                 ("hosting services", "storage platforms", "data centres", "backup services")),
    IndustrySpec("Semiconductor", "Halbleiterindustrie", "semiconductors", "maker of semiconductors",
                 "maker of [[semiconductor]]s", "chip market", ("Micro", "Semiconductors", "Devices"),
                 ("memory chips", "microcontrollers", "power transistors", "image sensors")),
    IndustrySpec("Banking", "Bankwesen", "banking", "bank", "[[Banking|bank]]", "retail banking market",
                 ("Bank", "Capital", "Finance"), ("savings accounts", "mortgages", "corporate loans", "payment cards")),
    IndustrySpec("Insurance", "Versicherungswirtschaft", "insurance", "insurance company", "[[insurance]] company",
                 "insurance market", ("Insurance", "Assurance", "Mutual"),
                 ("life insurance", "property insurance", "reinsurance", "health insurance")),
    IndustrySpec("Mining", "Bergbau", "mining", "mining company", "[[mining]] company", "metals market",
                 ("Mining", "Minerals", "Resources"), ("copper", "iron ore", "lithium", "nickel")),
    IndustrySpec("Shipbuilding", "Schiffbau", "shipbuilding", "shipbuilder", "[[shipbuilding|shipbuilder]]",
                 "shipbuilding market", ("Shipyards", "Marine", "Yards"),
                 ("container ships", "ferries", "naval vessels", "tugboats")),
    IndustrySpec("Pharmaceutical industry", "Pharmaindustrie", "pharmaceuticals", "pharmaceutical company",
                 "[[Pharmaceutical industry|pharmaceutical company]]", "market for prescription drugs",
                 ("Pharma", "Therapeutics", "Biologics"),
                 ("vaccines", "antibiotics", "generic drugs", "cancer treatments")),
    IndustrySpec("Telecommunications", "Telekommunikation", "telecommunications", "telecommunications company",
                 "[[telecommunications]] company", "mobile phone market", ("Telecom", "Mobile", "Communications"),
                 ("mobile networks", "broadband internet", "fibre optic lines", "satellite links")),
    IndustrySpec("Automotive industry", "Automobilindustrie", "car making", "car manufacturer",
                 "[[Automotive industry|car manufacturer]]", "car market", ("Motors", "Automotive", "Cars"),
                 ("electric cars", "trucks", "buses", "sports cars")),
    IndustrySpec("Retail", "Einzelhandel", "retail", "retailer", "[[retail]]er", "grocery market",
                 ("Retail", "Stores", "Markets"),
                 ("supermarkets", "department stores", "online shops", "convenience stores")),
    IndustrySpec("Renewable energy", "Erneuerbare Energie", "renewable energy", "renewable energy company",
                 "[[renewable energy]] company", "electricity market", ("Energy", "Power", "Solar"),
                 ("wind turbines", "solar parks", "hydroelectric plants", "battery storage")),
    IndustrySpec("Airline", "Fluggesellschaft", "aviation", "airline", "[[airline]]", "air travel market",
                 ("Air", "Airways", "Aviation"),
                 ("domestic flights", "cargo flights", "charter flights", "international routes")),
    IndustrySpec("Steel", "Stahlindustrie", "steel", "steel producer", "[[steel]] producer", "steel market",
                 ("Steel", "Metals", "Works"), ("steel plates", "rails", "pipes", "wire")),
    IndustrySpec("Brewing", "Brauwesen", "brewing", "brewery", "[[Brewing|brewery]]", "beer market",
                 ("Brewery", "Breweries", "Beverages"), ("lager", "wheat beer", "cider", "soft drinks")),
    IndustrySpec("Publishing", "Verlagswesen", "publishing", "publisher", "[[publishing|publisher]]",
                 "book market", ("Press", "Publishing", "Books"), ("novels", "textbooks", "newspapers", "magazines")),
    IndustrySpec("Rail transport", "Schienenverkehr", "rail transport", "railway company",
                 "[[Rail transport|railway]] company", "rail freight market", ("Rail", "Railways", "Transit"),
                 ("passenger trains", "freight trains", "sleeper services", "commuter lines")),
    IndustrySpec("Chemical industry", "Chemieindustrie", "chemicals", "chemical company",
                 "[[Chemical industry|chemical]] company", "specialty chemicals market",
                 ("Chemicals", "Chemie", "Polymers"), ("plastics", "fertilisers", "paints", "industrial gases")),
    IndustrySpec("Logistics", "Logistik", "logistics", "logistics company", "[[logistics]] company",
                 "freight market", ("Logistics", "Freight", "Cargo"),
                 ("warehousing", "parcel delivery", "freight forwarding", "cold storage")),
    IndustrySpec("Video game industry", "Computerspielindustrie", "video games", "video game developer",
                 "[[Video game industry|video game]] developer", "video game market",
                 ("Games", "Interactive", "Studios"),
                 ("strategy games", "mobile games", "racing games", "puzzle games")),
    IndustrySpec("Construction", "Bauwirtschaft", "construction", "construction company",
                 "[[construction]] company", "construction market", ("Construction", "Builders", "Engineering"),
                 ("bridges", "office towers", "motorways", "tunnels")),
    IndustrySpec("Textile industry", "Textilindustrie", "textiles", "textile manufacturer",
                 "[[Textile industry|textile]] manufacturer", "clothing market", ("Textiles", "Mills", "Fabrics"),
                 ("cotton fabrics", "wool yarn", "workwear", "carpets")),
    IndustrySpec("Agriculture", "Landwirtschaft", "agriculture", "agricultural company",
                 "[[agriculture|agricultural]] company", "grain market", ("Farms", "Agro", "Harvest"),
                 ("wheat", "dairy products", "sugar beet", "animal feed")),
    IndustrySpec("Tourism", "Tourismus", "tourism", "tourism company", "[[tourism]] company", "holiday market",
                 ("Travel", "Tours", "Resorts"), ("package holidays", "hotels", "cruises", "ski resorts")),
)

SYLLABLES = ("vel", "tra", "no", "os", "ka", "ren", "dor", "mi", "sa", "lan", "tor", "vik", "bel", "ga", "ris",
             "hal", "den", "mar", "zo", "quin", "fen", "ar", "lu", "ce", "pra", "ston", "dal", "ber", "ne", "ta",
             "ly", "sol", "var", "el", "ko", "rum", "te", "si", "bra", "mon")
COUNTRY_ENDINGS = (("ia", "n", "ien"), ("ania", "n", "anien"), ("a", "n", "a"), ("and", "ic", "and"),
                   ("ora", "n", "ora"))
OFFICIAL_FORMS = ("Republic of {}", "Kingdom of {}", "Federal Republic of {}", "Grand Duchy of {}",
                  "United Provinces of {}")
REGIONS = ("the Northern Reach", "the Amber Coast", "the Sarn Basin", "the Eastern Marches",
           "the Halcyon Archipelago")
CURRENCIES = ("florin", "krona", "mark", "thaler", "dinar", "crown")
CITY_ENDINGS = ("", "", "burg", "hold", "port", "vik", "stad", "ford", "heim")
CITY_ADJECTIVES = ("port", "industrial", "historic", "cathedral", "market")
FEMALE_NAMES = ("Mira", "Lysa", "Renée", "Ilse", "Nadia", "Tamsin", "Oriane", "Katya", "Elin", "Sabine", "Yara",
                "Greta", "Ines", "Livia", "Marit", "Zofia", "Anouk", "Helka")
MALE_NAMES = ("Anton", "Tobiah", "Søren", "Kasimir", "Emil", "Bram", "Teodor", "Lucan", "Jorin", "Matthis",
              "Oskar", "Ivo", "Dario", "Feliks", "Ruben", "Aleksi", "Nils", "Corvin")
SURNAME_ENDINGS = ("bach", "feld", "mann", "sen", "ova", "ić", "ström", "ley", "ard", "ini", "berg", "ez")
OCCUPATIONS = ("entrepreneur", "engineer", "business executive", "economist", "investor", "chemist")
SUBJECTS = ("economics", "engineering", "chemistry", "law", "business administration", "physics",
            "computer science")
COMPANY_GROUP_WORDS = ("Group", "Holdings", "Industries", "International")
