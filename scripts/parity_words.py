"""Word lists and a sentence composer for scripts/make_parity_suite.py: invented reports in
English and short prompts in other languages, all written for denv's parity suite."""

from __future__ import annotations

import random
from typing import NamedTuple

SUBJECTS = [
    "the storage team",
    "the night shift",
    "the billing service",
    "the design group",
    "the harbour office",
    "the north depot",
    "the support desk",
    "the research lab",
    "the city council",
    "the river crew",
    "the bakery on Elm Street",
    "the school board",
    "the volunteer fire brigade",
    "the museum staff",
    "the weather station",
    "the ferry company",
]
VERBS = [
    "moved",
    "reviewed",
    "replaced",
    "postponed",
    "measured",
    "repaired",
    "expanded",
    "cancelled",
    "tested",
    "rebuilt",
    "inspected",
    "shared",
    "painted",
    "renamed",
    "audited",
]
OBJECTS = [
    "the nightly backup",
    "the loading dock",
    "the spring schedule",
    "the water pumps",
    "the customer survey",
    "the old bridge",
    "the main kitchen",
    "the pilot program",
    "the supplier contract",
    "the signal lights",
    "the budget draft",
    "the training plan",
    "the roof of the gym",
    "the parking rules",
    "the ticket machines",
    "the cold store",
]
PLACES = [
    "in Riverton",
    "at the east yard",
    "near the harbour",
    "in the old mill",
    "at the central station",
    "in the west wing",
    "on the third floor",
    "at Pine Hill",
    "in Lower Brook",
    "at the airfield",
    "by the canal",
    "in the market hall",
]
WHEN = [
    "on Monday",
    "last week",
    "in early March",
    "after the storm",
    "before the audit",
    "during the night",
    "this quarter",
    "at short notice",
    "over the holidays",
    "in June",
]
REASONS = [
    "costs rose by {n} percent",
    "two machines failed",
    "the forecast changed",
    "customers asked for it",
    "the old setup was too slow",
    "a safety check found {n} problems",
    "demand doubled",
    "the deadline moved",
    "{n} people signed a petition",
    "the previous supplier closed",
    "an inspector raised concerns",
]
MONTHS = ["January", "April", "July", "September", "November"]
TEMPLATES = [
    "{s} {v} {o} {p} {w}.",
    "{s} {v} {o} {w} because {r}.",
    "According to {s2}, {o} will cost about {money} dollars.",
    "{s} expects {n} new staff {p} by {month}.",
    "Nobody {p} had seen {o} in such a state since {year}.",
    "The report notes that {r}.",
    "Meanwhile, {s} {v} {o}, which took {n} hours.",
    "A spokesperson said the work {p} would finish by {month}.",
    "{s} and {s2} disagree about {o}; a decision is due {w}.",
    "In total, {n} households {p} were affected.",
    "It is the {ordinal} time that {s} has {v} {o}.",
    "Residents {p} asked whether {o} would reopen before {month}.",
]
ORDINALS = ["second", "third", "fourth", "fifth"]
TITLES = ["Report", "Weekly notes", "Incident summary", "Project update", "Minutes"]


class Prose:
    """Sentences and documents drawn from the lists above with the caller's generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def sentence(self) -> str:
        r = self.rng
        s, s2 = r.sample(SUBJECTS, 2)
        text = r.choice(TEMPLATES).format(
            s=s,
            s2=s2,
            v=r.choice(VERBS),
            o=r.choice(OBJECTS),
            p=r.choice(PLACES),
            w=r.choice(WHEN),
            r=r.choice(REASONS).format(n=r.randint(2, 40)),
            n=r.randint(2, 300),
            money=f"{r.randint(2, 900) * 1000:,}",
            month=r.choice(MONTHS),
            year=r.randint(1960, 2019),
            ordinal=r.choice(ORDINALS),
        )
        return text[0].upper() + text[1:]

    def document(self, words: int) -> str:
        """A titled text of paragraphs, at least `words` words long."""
        r = self.rng
        title = f"{r.choice(TITLES)} {r.randint(1, 99)}: {r.choice(OBJECTS)} {r.choice(PLACES)}"
        paragraphs, count = [], 0
        while count < words:
            sentences = [self.sentence() for _ in range(r.randint(3, 6))]
            paragraph = " ".join(sentences)
            paragraphs.append(paragraph)
            count += len(paragraph.split())
        return title[0].upper() + title[1:] + "\n\n" + "\n\n".join(paragraphs)


class Language(NamedTuple):
    name: str  # in English, for "Translate into ..."
    asks: list[str]  # each takes a {topic} that fits every one of them
    topics: list[str]


LANGUAGES: dict[str, Language] = {
    "de": Language(
        "German",
        [
            "Erkläre in wenigen Sätzen {topic}.",
            "Schreibe einen kurzen Absatz über {topic}.",
            "Was sind die drei wichtigsten Dinge über {topic}?",
        ],
        [
            "den Wasserkreislauf",
            "die Photosynthese",
            "die Geschichte des Fahrrads",
            "das Kochen mit Gemüse der Saison",
            "Nachtzüge in Europa",
        ],
    ),
    "es": Language(
        "Spanish",
        [
            "Explica en pocas frases {topic}.",
            "Escribe un párrafo corto sobre {topic}.",
            "¿Cuáles son las tres cosas más importantes sobre {topic}?",
        ],
        [
            "el ciclo del agua",
            "la fotosíntesis",
            "la historia de la bicicleta",
            "la cocina de temporada",
            "los trenes nocturnos",
        ],
    ),
    "fr": Language(
        "French",
        [
            "Explique en quelques phrases {topic}.",
            "Écris un court paragraphe sur {topic}.",
            "Quelles sont les trois choses les plus importantes à savoir sur {topic} ?",
        ],
        [
            "le cycle de l'eau",
            "la photosynthèse",
            "l'histoire du vélo",
            "la cuisine de saison",
            "les trains de nuit",
        ],
    ),
    "it": Language(
        "Italian",
        [
            "Spiega in poche frasi {topic}.",
            "Scrivi un breve paragrafo. Argomento: {topic}.",
            "Quali sono le tre cose più importanti da sapere? Argomento: {topic}.",
        ],
        [
            "il ciclo dell'acqua",
            "la fotosintesi",
            "la storia della bicicletta",
            "la cucina di stagione",
            "i treni notturni",
        ],
    ),
    "ja": Language(
        "Japanese",
        [
            "{topic}について、いくつかの文で説明してください。",
            "{topic}について短い段落を書いてください。",
            "{topic}について知っておくべき大切なことを三つ挙げてください。",
        ],
        ["水の循環", "光合成", "自転車の歴史", "旬の料理", "夜行列車"],
    ),
    "nl": Language(
        "Dutch",
        [
            "Leg in een paar zinnen {topic} uit.",
            "Schrijf een korte alinea over {topic}.",
            "Wat zijn de drie belangrijkste dingen over {topic}?",
        ],
        [
            "de waterkringloop",
            "fotosynthese",
            "de geschiedenis van de fiets",
            "koken met seizoensgroenten",
            "nachttreinen in Europa",
        ],
    ),
    "pt": Language(
        "Portuguese",
        [
            "Explique em poucas frases {topic}.",
            "Escreva um parágrafo curto sobre {topic}.",
            "Quais são as três coisas mais importantes sobre {topic}?",
        ],
        [
            "o ciclo da água",
            "a fotossíntese",
            "a história da bicicleta",
            "a culinária sazonal",
            "os trens noturnos",
        ],
    ),
    "ru": Language(
        "Russian",
        [
            "Объясни в нескольких предложениях {topic}.",
            "Напиши короткий абзац про {topic}.",
            "Назови три самых важных факта про {topic}.",
        ],
        [
            "круговорот воды",
            "фотосинтез",
            "историю велосипеда",
            "сезонную кухню",
            "ночные поезда",
        ],
    ),
    "zh": Language(
        "Chinese",
        [
            "请用几句话解释{topic}。",
            "请写一段关于{topic}的短文。",
            "关于{topic}，最重要的三件事是什么？",
        ],
        ["水循环", "光合作用", "自行车的历史", "时令菜", "夜间列车"],
    ),
}
