"""Agent attachment files: parsed with validation, errors naming the file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.access import readable_scopes
from memory.attachment import AttachmentError, Attachments, from_path, load
from memory.policy import AgentRules
from memory.records import Layer, Scope

RULES_TOML = """
[default]
user_memory_from = ["private"]

[agents.checker]
writes = false

[agents.scribe]
reads = false
write_layers = ["private", "shared"]

[agents.announcer]
read_layers = ["agent", "tenant"]
write_layers = ["agent", "tenant"]
user_memory_from = ["private", "shared"]
inferred_bar = 0.6
publish_from_user_runs = ["agent"]
"""


def test_toml_file_attaches_agents_and_defaults_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(RULES_TOML)
    rules = load(path)
    assert not rules("checker").may_write(Layer.PRIVATE)
    assert not rules("scribe").reads_enabled and rules("scribe").may_write(Layer.SHARED)
    assert not rules("scribe").may_write(Layer.AGENT)
    announcer = rules("announcer")
    assert announcer.may_write(Layer.TENANT) and announcer.inferred_bar == 0.6
    assert not announcer.may_read(Layer.PRIVATE, "private")
    assert announcer.publish_from_user_runs == {Layer.AGENT}
    assert rules("checker").publish_from_user_runs == frozenset()
    assert rules("unnamed") == AgentRules.default()


def test_json_file_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text('{"agents": {"checker": {"writes": false}}}')
    assert not from_path(str(path))("checker").writes_enabled
    assert from_path("") == Attachments()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[agents.checker]\nwrite = false\n", "agents.checker.write"),
        ('[agents.checker]\nread_layers = ["everyone"]\n', "agents.checker.read_layers.0"),
        ("[agents.checker]\ninferred_bar = 1.5\n", "agents.checker.inferred_bar"),
        ('[agents.checker]\nwrites = "no"\n', "agents.checker.writes"),
        ("[defaults]\n", "defaults"),
        ('[agents.c]\npublish_from_user_runs = ["shared"]\n', "agents.c.publish_from_user_runs"),
        ('[agents.c]\npublish_from_user_runs = ["all"]\n', "agents.c.publish_from_user_runs.0"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    with pytest.raises(AttachmentError) as error:
        load(path)
    assert str(path) in str(error.value) and where in str(error.value)


def test_unreadable_or_malformed_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError, match="missing.toml"):
        load(tmp_path / "missing.toml")
    bad = tmp_path / "rules.toml"
    bad.write_text("[agents\n")
    with pytest.raises(AttachmentError, match="not valid TOML"):
        load(bad)
    yaml = tmp_path / "rules.yaml"
    yaml.write_text("x: 1")
    with pytest.raises(AttachmentError, match=r"\.toml or \.json"):
        load(yaml)


def test_trigger_origin_withholds_the_persons_layers_by_default() -> None:
    ana = Scope("acme", "ana", "triage")
    rules = AgentRules.default()
    assert readable_scopes(ana, rules, origin="private") == ana.readable()
    layers = [s.layer for s in readable_scopes(ana, rules, origin="shared")]
    assert layers == [Layer.AGENT, Layer.TENANT]
    assert readable_scopes(ana, rules) == readable_scopes(ana, rules, origin="api")
    assert readable_scopes(ana, AgentRules(reads_enabled=False), origin="private") == ()
    assert readable_scopes(ana) == ana.readable()
