"""The CLI changes clickhouse-connect's options only while ``main()`` runs a command: importing the CLI (as a
program that uses otel-replay as a library may, through the pytest plugin or ``otel_replay.cli``) leaves them as
clickhouse-connect set them, and ``main()`` puts them back when its command ends.

Each check runs in a process of its own, where nothing has touched the options yet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent(
    """
    import json, sys
    seen_file = sys.argv[1]
    import otel_replay.cli
    import otel_replay.cli.app
    from clickhouse_connect.driver import options

    def state():
        return {name: repr(vars(options).get(name, "unset")) for name in ("pd", "pd_time_test")}

    seen = {"imported": state()}
    sys.argv = ["otel-replay", "db", "init"]
    try:
        otel_replay.cli.main()
    except SystemExit as exc:
        seen["code"] = exc.code
    seen["after_main"] = state()
    seen["pandas"] = "pandas" in sys.modules
    with open(seen_file, "w") as out:
        json.dump(seen, out)
    """
)


def test_importing_the_cli_or_running_a_command_leaves_clickhouse_connect_options_as_they_were(
    tmp_path: Path,
) -> None:
    script = tmp_path / "import_cli.py"
    script.write_text(_SCRIPT)
    env = {**os.environ, "OTEL_REPLAY_HOME": str(tmp_path / "home")}
    env.pop("OTEL_REPLAY_STORE", None)
    found = tmp_path / "seen.json"
    done = subprocess.run(
        [sys.executable, str(script), str(found)], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(found.read_text())
    assert seen["code"] in (0, None), done.stderr
    unset = {"pd": "'unset'", "pd_time_test": "'unset'"}
    assert seen["imported"] == unset  # importing the CLI changed nothing
    assert seen["after_main"] == unset  # the command's change was put back
    assert seen["pandas"] is False  # and during the command, the DataFrame check did not import pandas
