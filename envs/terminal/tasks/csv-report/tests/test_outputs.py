import json


def load():
    with open("/app/report.json") as f:
        return json.load(f)


def test_revenue_per_region():
    assert load()["revenue"] == {"north": 71.25, "south": 11.3, "east": 23.15}


def test_top_product():
    assert load()["top_product"] == "gizmo"
