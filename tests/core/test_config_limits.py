"""Config limits (issue 10, defect 7): alias bombs, huge values, dotted overrides."""
from __future__ import annotations

import pytest

from vlnverse.core.config import MAX_YAML_ALIASES, parse_overrides, safe_yaml, set_dotted, short
from vlnverse.core.errors import ConfigError


def test_an_alias_bomb_is_refused_fast_with_a_short_message():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    with pytest.raises(ConfigError) as err:  # refused before expanding 9**9 items (minutes and GBs otherwise)
        safe_yaml(bomb, file="bomb.yaml")
    assert "expands to more than" in str(err.value) and len(str(err.value)) < 200
    many = "x: &x 1\ny: [" + ", ".join(["*x"] * (MAX_YAML_ALIASES + 1)) + "]\n"
    with pytest.raises(ConfigError, match="more than 100 aliases"):
        safe_yaml(many, file="many.yaml")
    assert safe_yaml("a: &a {k: 1}\nb: *a\n") == {"a": {"k": 1}, "b": {"k": 1}}  # ordinary anchors still work


def test_messages_quote_only_a_prefix():
    assert len(short("x" * 10_000)) <= 60 and len(short(list(range(10_000)))) <= 60
    err = ConfigError("got " + "y" * 5000, file="f.yaml", field="seed")
    assert len(str(err)) < 330 and "\n" not in str(err)


def test_dotted_overrides_into_strings_and_lists():
    data = {"task": "fine_grained", "sensors": [{"width": 8}]}
    set_dotted(data, "sensors.0.width", 32)
    assert data["sensors"][0]["width"] == 32
    with pytest.raises(ConfigError, match="task.x: 'task' is 'fine_grained', not a mapping"):
        set_dotted(data, "task.x", 1)
    with pytest.raises(ConfigError, match="sensors.3.width: 'sensors' is a list of 1"):
        set_dotted(data, "sensors.3.width", 1)
    with pytest.raises(ConfigError, match="malformed YAML"):
        parse_overrides(["seed=[1,"])
