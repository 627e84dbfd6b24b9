"""Concrete, realistic values for a JSON Schema, drawn from a seeded RNG; plus how values are shown and compared.

The scripted task author fills expected arguments with these values and the scripted tool role fills result
schemas with them. The parameter name steers the choice (an `email` gets an address, a `city` a city), so the
values read like a real request. `same_value` is the comparison the verifier scores arguments with.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

FIRST = ["Ana", "Bilal", "Chen", "Dara", "Elif", "Felix", "Greta", "Hiro", "Ines", "Jonas", "Kemal", "Lena"]
LAST = ["Okafor", "Novak", "Lindqvist", "Moreau", "Tanaka", "Rossi", "Schmidt", "Haddad", "Kowalski", "Silva"]
DOMAINS = ["northwind.io", "example.org", "brightlabs.dev", "mailbox.eu"]
CITIES = ["Lisbon", "Berlin", "Osaka", "Toronto", "Nairobi", "Melbourne", "Valencia", "Krakow", "Denver"]
COUNTRIES = ["DE", "FR", "PT", "JP", "CA", "KE", "AU", "ES", "PL", "US"]
CURRENCIES = ["EUR", "USD", "GBP", "CHF", "JPY"]
LANGUAGES = ["en", "de", "fr", "es", "pt", "ja"]
AIRPORTS = ["LIS", "FRA", "KIX", "YYZ", "NBO", "MEL", "VLC", "KRK", "DEN", "AMS"]
STATIONS = ["Berlin Hbf", "Hamburg Dammtor", "Koeln Hbf", "Muenchen Ost", "Zuerich HB", "Wien Meidling"]
TOPICS = ["quarterly budget review", "onboarding checklist", "release 2.4 retro", "team offsite plan",
          "vendor contract renewal", "customer churn analysis", "kitchen renovation", "marathon training"]
NAMED = {
    "room": ["kitchen", "living room", "office", "bedroom", "hallway"],
    "device": ["Living Room Speaker", "Kitchen Display", "Office Laptop"],
    "notebook": ["Work", "Recipes", "Travel Plans", "Reading Notes"],
    "channel": ["release-planning", "support-escalations", "team-berlin", "random"],
    "application": ["Jira", "Salesforce", "Figma", "Grafana"],
    "pharmacy": ["Apotheke am Markt", "Farmacia Central", "CityCare Pharmacy"],
    "store": ["FreshMart", "Bio Corner", "Costa Market"],
    "merchant": ["Hotel Lisboa Centro", "TaxiCab Berlin", "Cafe Oslo", "Office Depot"],
    "company": ["Northwind Traders", "Brightlabs GmbH", "Osaka Logistics", "Maple Health"],
    "cuisine": ["thai", "italian", "mexican", "japanese"],
    "food": ["oatmeal", "banana", "grilled chicken", "lentil soup"],
    "network": ["prod-vpc", "staging-net", "office-lan"],
    "service": ["checkout-api", "search-indexer", "auth-gateway"],
    "project_code": ["PRJ-2041", "OPS-117", "MKT-88"],
}
WORDS = ["alpha", "harbor", "ledger", "maple", "orbit", "pixel", "quartz", "river", "summit", "tulip"]


def _string(name: str, schema: dict, rng: random.Random) -> str:
    fmt, low, desc = schema.get("format"), name.lower(), str(schema.get("description", "")).lower()
    first, last = rng.choice(FIRST), rng.choice(LAST)
    if fmt == "email" or low.endswith("email") or "e-mail" in desc:
        return f"{first.lower()}.{last.lower()}@{rng.choice(DOMAINS)}"
    if fmt == "date" or low.endswith("_date") or low in {"date", "week_start"}:
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if fmt == "date-time" or low.endswith(("_at", "_time", "_after")):
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(7, 19):02d}:{rng.choice(['00', '30'])}:00+01:00"
    if fmt == "uri" or low.endswith(("url", "uri")):
        return f"https://files.{rng.choice(DOMAINS)}/{rng.choice(WORDS)}-{rng.randint(100, 999)}"
    if low.endswith("_id") or low == "id":
        prefix = "".join(part[:3] for part in low.removesuffix("_id").split("_"))[:6] or "id"
        return f"{prefix}_{rng.getrandbits(32):08x}"
    if "iata" in desc or low in {"origin", "destination"} and "airport" in desc:
        return rng.choice(AIRPORTS)
    if "station" in low:
        return rng.choice(STATIONS)
    if low in {"city"} or desc.startswith("city"):
        return rng.choice(CITIES)
    if "country" in low:
        return rng.choice(COUNTRIES)
    if "currency" in low or "4217" in desc:
        return rng.choice(CURRENCIES)
    if "language" in low or "639" in desc:
        return rng.choice(LANGUAGES)
    if low in {"phone", "contact"} or "phone" in desc:
        return f"+49 30 {rng.randint(1000000, 9999999)}"
    if "iban" in desc or low.endswith("account"):
        return f"DE{rng.randint(10, 99)} 1001 0010 {rng.randint(1000, 9999)} {rng.randint(1000, 9999)} 00"
    if low in {"full_name", "name"} and "person" in desc or low in {"full_name", "assignee", "customer"}:
        return f"{first} {last}"
    if low in {"first_name"}:
        return first
    if low in {"last_name"}:
        return last
    if low == "repository":
        return f"{rng.choice(['acme', 'northwind', 'brightlabs'])}/{rng.choice(WORDS)}-service"
    if low in NAMED and fmt is None:
        return rng.choice(NAMED[low])
    if low == "branch" and "pickup" in desc:
        return f"{rng.choice(CITIES)} Central Library"
    if "branch" in low or low == "from_ref":
        return f"feature/{rng.choice(WORDS)}-{rng.randint(10, 99)}"
    if low in {"street", "address", "near", "origin", "destination"}:
        return f"{rng.choice(['Rua Augusta', 'Torstrasse', 'King Street', 'Calle Mayor'])} {rng.randint(1, 180)}, {rng.choice(CITIES)}"
    if low in {"postal_code"}:
        return f"{rng.randint(10000, 99999)}"
    if low in {"sku", "code", "zone", "card_last4", "seat", "flight_number", "isbn", "plate", "source_cidr",
               "tracking_number", "emoji", "image"}:
        return {
            "sku": f"SKU-{rng.randint(1000, 9999)}", "code": f"{rng.choice(WORDS).upper()}{rng.randint(10, 50)}",
            "zone": f"Z{rng.randint(100, 999)}", "card_last4": f"{rng.randint(1000, 9999)}",
            "seat": f"{rng.randint(1, 40)}{rng.choice('ABCDEF')}", "flight_number": f"LH{rng.randint(100, 999)}",
            "isbn": f"978{rng.randint(1000000000, 9999999999)}", "plate": f"B-TC {rng.randint(100, 9999)}",
            "source_cidr": f"10.{rng.randint(0, 255)}.0.0/16", "tracking_number": f"1Z{rng.getrandbits(40):010X}",
            "emoji": rng.choice([":palm_tree:", ":coffee:", ":rocket:"]), "image": "ubuntu-24.04",
        }[low]
    if low in {"title", "name", "subject", "summary", "topic", "label", "query", "text", "words", "reference"}:
        return rng.choice(TOPICS)
    if low in {"body", "description", "message", "note", "reason", "special_requests", "comment"}:
        return f"Please see the notes on the {rng.choice(TOPICS)} and confirm by Friday."
    return f"{rng.choice(WORDS)}-{rng.randint(10, 99)}"


def generate_value(schema: Any, name: str, rng: random.Random, optional_rate: float = 0.0, depth: int = 0) -> Any:
    """A value valid under `schema`; optional object properties are included with `optional_rate`."""
    if not isinstance(schema, dict):
        return f"{rng.choice(WORDS)}"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return rng.choice(schema["enum"])
    kind = schema.get("type", "string")
    if kind == "integer":
        lo = int(schema.get("minimum", 1))
        hi = int(schema.get("maximum", lo + 60))
        return rng.randint(lo, min(hi, lo + 60) if hi > lo else lo)
    if kind == "number":
        lo = float(schema.get("minimum", 1))
        hi = float(schema.get("maximum", lo + 500))
        return round(rng.uniform(lo, min(hi, lo + 500)), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        count = min(rng.randint(1, 2), int(schema.get("maxItems", 2)))
        item_name = name[:-1] if name.endswith("s") else name
        return [generate_value(schema.get("items", {}), item_name, rng, optional_rate, depth + 1) for _ in range(count)]
    if kind == "object":
        props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
        required = [k for k in schema.get("required", []) if k in props]
        chosen = list(required)
        optional = [k for k in props if k not in required]
        chosen += [k for k in optional if depth < 3 and rng.random() < optional_rate]
        if len(chosen) < int(schema.get("minProperties", 0)) and optional:
            chosen += rng.sample([k for k in optional if k not in chosen], 1)
        return {k: generate_value(props[k], k, rng, optional_rate, depth + 1) for k in props if k in chosen}
    return _string(name, schema, rng)


def show(value: Any) -> str:
    """How a value is written in a user's message: strings quoted, structures as compact JSON."""
    if isinstance(value, str):
        return f'"{value}"'
    return json.dumps(value, ensure_ascii=False)


def humanize(name: str) -> str:
    return name.replace("_", " ")


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub(r"\s+", " ", value.strip().casefold())
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    return value


def same_value(expected: Any, got: Any) -> bool:
    """Whether a called argument matches the expected one (case/space-insensitive; objects may hold extra keys)."""
    if isinstance(expected, dict):
        return isinstance(got, dict) and all(k in got and same_value(v, got[k]) for k, v in expected.items())
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return False
        if all(not isinstance(v, dict | list) for v in expected):
            key = lambda v: json.dumps(_norm(v), sort_keys=True, default=str)  # noqa: E731
            return sorted(map(key, expected)) == sorted(map(key, got))
        return all(same_value(x, y) for x, y in zip(expected, got, strict=True))
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got
    return _norm(expected) == _norm(got)
