"""configure(): defaults, validation at setup, and what Store.open() picks up from it."""

from __future__ import annotations

from pathlib import Path

import pytest

import otel_replay as orp
from otel_replay.exporting import setup


def test_store_open_uses_the_configured_home(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "configured-home"
    orp.configure(home=other, exporter="spool")

    @orp.agent("configured")
    def hello() -> str:
        return "hi"

    hello()
    orp.flush()
    with orp.Store.open() as store:
        assert [r.agent for r in store.runs()] == ["configured"]
    assert (other / "store").is_dir()
    assert not (home / "store").exists()


def test_configure_is_idempotent(home: Path) -> None:
    provider = orp.configure(home=home, exporter="spool")
    runtime = setup.runtime()
    assert orp.configure() is provider
    assert orp.configure(home=home, exporter="spool") is provider
    assert setup.runtime() is runtime


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OTEL_REPLAY_EXPORTER", "carrier-pigeon", "unknown exporter"),
        ("OTEL_REPLAY_SNAPSHOT_MAX_BYTES", "lots", "OTEL_REPLAY_SNAPSHOT_MAX_BYTES must be a whole number"),
        ("OTEL_REPLAY_SNAPSHOT_CHUNK_CHARS", "0", "OTEL_REPLAY_SNAPSHOT_CHUNK_CHARS must be at least 1"),
        ("OTEL_REPLAY_ATTACHMENT_MAX_BYTES", "-5", "OTEL_REPLAY_ATTACHMENT_MAX_BYTES must be at least 0"),
    ],
)
def test_bad_settings_fail_at_setup_with_the_variable_named(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=message):
        orp.configure(home=tmp_path / "elsewhere", exporter=None)


def test_a_secret_pasted_into_a_numeric_setting_never_reaches_the_error(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-proj-" + "Qm7x" * 8
    monkeypatch.setenv("OTEL_REPLAY_SNAPSHOT_MAX_BYTES", secret)
    with pytest.raises(ValueError, match="OTEL_REPLAY_SNAPSHOT_MAX_BYTES must be a whole number") as raised:
        orp.configure(home=tmp_path / "elsewhere", exporter=None)
    assert secret not in str(raised.value) and "Qm7x" not in str(raised.value)
    assert f"a value of {len(secret)} characters" in str(raised.value)


def test_bad_lock_timeout_is_a_clear_error(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_REPLAY_LOCK_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="OTEL_REPLAY_LOCK_TIMEOUT must be a number of seconds"):
        orp.Store.open()
