"""A recording call made outside a run records nothing and says so: once per process and call, pointed at the
caller's line, never inside a run, and never as an exception (not even when the host turns warnings into
errors).

Each check runs in a process of its own: "once per process" is the property under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    import otel_replay as orp
    from otel_replay.recording import OutsideRunWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        orp.record_state({"step": 1})
        orp.record_state({"step": 2})
        orp.record_context(memory=["a"])
        orp.record_approval("ap-1", status="approved", tool="send")
        orp.record_safety(True)
        orp.attach_file(b"notes", name="notes.txt")
        orp.attach_file(b"notes", name="notes.txt")
        outside = [(str(w.message), w.filename, w.category is OutsideRunWarning) for w in caught]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @orp.agent("outside-run-warning")
        def agent():
            orp.record_state({"step": 3})
            orp.record_context(memory=["b"])
            orp.record_safety(True)
            orp.attach_file(b"notes", name="notes.txt")
            return "done"

        agent()
        inside = [str(w.message) for w in caught if issubclass(w.category, OutsideRunWarning)]
    json.dump({"outside": outside, "inside": inside, "script": __file__}, sys.stdout)
    """
)


_STRICT_SCRIPT = textwrap.dedent(
    """
    import otel_replay as orp

    orp.record_state({"step": 1})
    orp.attach_file(b"notes", name="notes.txt")
    print("carried on")
    """
)


def _run(tmp_path: Path, source: str, *flags: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "record_outside.py"
    script.write_text(source)
    env = {"OTEL_REPLAY_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, *flags, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )


def test_each_recording_call_outside_a_run_warns_once_and_none_inside(tmp_path: Path) -> None:
    done = _run(tmp_path, _SCRIPT)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    messages = [message for message, _, _ in seen["outside"]]
    assert len(messages) == 5, messages  # record_state and attach_file were called twice: one warning each
    for call in ("record_state", "record_context", "record_approval", "record_safety", "attach_file"):
        (message,) = [m for m in messages if m.startswith(f"otel_replay.{call}() ")]
        assert "outside a run and recorded nothing" in message and "@otel_replay.agent" in message
    assert all(is_ours and filename == seen["script"] for _, filename, is_ours in seen["outside"])
    assert seen["inside"] == []


def test_a_warning_filter_set_to_error_does_not_make_a_recording_call_raise(tmp_path: Path) -> None:
    done = _run(tmp_path, _STRICT_SCRIPT, "-W", "error")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "carried on\n"
    assert "Traceback" not in done.stderr
    assert "record_state called outside a run; nothing recorded" in done.stderr  # said as a log line instead
