"""The production-path files (Collector configs, docker-compose stack, Grafana data source, ClickHouse init SQL).

No Docker engine runs on the test machines, so these tests check the files themselves: that they parse, that
every Collector component a pipeline uses is defined (and every defined one used), that the ClickHouse
exporter writes the tables otel-replay reads with a persistent, fsync'ed queue and retries bounded in time,
that Jaeger sits on its own pipeline behind a connector and a batch processor (so its failures never reach the
receiver), that the compose file pins its images, publishes each port once, mounts only paths that exist,
limits the Collector's memory, gives the Collector and Grafana their own least-privilege ClickHouse users and
takes every credential from ``.env``, that the committed init SQL is exactly what ``otel-replay db init
--print`` generates, and that this SQL runs on the real ClickHouse engine (chDB) and builds the same tables the
store creates itself. The Prometheus alert rules must parse, be loaded, and name only metrics the Collector
publishes; the image pin must be the version the operations guide reasoned about. Every key of the Collector
configs is checked in tests/test_collector_schema.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_replay.storage import ddl
from otel_replay.storage.store import Store

ROOT = Path(__file__).resolve().parent.parent
COLLECTOR_CONFIGS = [
    ROOT / "collector-config" / "collector.yaml",
    ROOT / "collector-config" / "gateway.yaml",
    ROOT / "collector-config" / "agent.yaml",
]
CLICKHOUSE_CONFIGS = COLLECTOR_CONFIGS[:2]  # the configs that write ClickHouse (agent.yaml writes the gateways)
USERS_XML = ROOT / "clickhouse" / "users.d" / "otel-replay-users.xml"
PROMETHEUS_DATASOURCE = ROOT / "dashboards" / "provisioning" / "datasources" / "prometheus.yaml"
COMPOSE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
INIT_SQL = ROOT / "clickhouse" / "init" / "01-otel-replay.sql"
DATASOURCE = ROOT / "dashboards" / "provisioning" / "datasources" / "clickhouse.yaml"
DASHBOARD_PROVIDER = ROOT / "dashboards" / "provisioning" / "dashboards" / "otel-replay.yaml"
COLLECTOR_CONFIG_IN_CONTAINER = "/etc/otelcol-contrib/config.yaml"
SECTIONS = ("receivers", "processors", "exporters", "extensions", "connectors")

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?message}, ${VAR?message} as docker compose reads them
# ($$ is compose's escape for a literal $ and is not a variable).
_COMPOSE_VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def _load_yaml(path: Path) -> Any:
    """Parse one YAML file (a parse error fails the test that asked)."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _env_example() -> dict[str, str]:
    """``NAME=value`` lines of .env.example (comments and blank lines skipped)."""
    values: dict[str, str] = {}
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep, f".env.example line is not NAME=value: {line!r}"
        values[name.strip()] = value.strip()
    return values


def _compose_variables() -> list[tuple[str, str | None, str | None]]:
    """Every ``${...}`` in the compose file as (name, operator or None, default-or-message or None)."""
    return [(m.group(1), m.group(2), m.group(3)) for m in _COMPOSE_VAR.finditer(COMPOSE.read_text(encoding="utf-8"))]


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Resolve compose variables in ``value`` the way ``docker compose`` does with ``env`` as the .env file."""

    def repl(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if name in env and (env[name] != "" or op not in (":-", ":?")):
            return env[name]
        if op in (":-", "-"):
            return arg or ""
        raise AssertionError(f"compose variable {name} has no value and no default")

    return _COMPOSE_VAR.sub(repl, value).replace("$$", "$")


def _required_variables() -> set[str]:
    """Compose variables written ``${VAR:?…}`` / ``${VAR?…}``: no default, compose refuses to start without them."""
    return {name for name, op, _ in _compose_variables() if op in (":?", "?")}


def _compose() -> dict[str, Any]:
    """The compose file parsed, with variables resolved from .env.example after a user set the required ones."""
    env = _env_example()
    env.update({name: f"set-by-user-{name.lower()}" for name in _required_variables() if not env.get(name)})
    text = _interpolate(COMPOSE.read_text(encoding="utf-8"), env)
    return yaml.safe_load(text)


def _component_type(component_id: str) -> str:
    """``otlp/jaeger`` → ``otlp``."""
    return component_id.split("/", 1)[0]


def _seconds(duration: Any) -> float:
    """A Collector duration (``90s``, ``5m``, ``1h``, ``1h30m``, or a bare number of nanoseconds) in seconds."""
    text = str(duration)
    if re.fullmatch(r"\d+", text):
        return int(text) / 1e9
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a duration: {text!r}"
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(n) * scale[u] for n, u in parts)


def _sql_statements(script: str) -> list[str]:
    """The statements of a ``;``-terminated script, comment lines dropped."""
    body = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";") if s.strip()]


# ------------------------------------------------------------------------------------------ collector configs


@pytest.mark.parametrize("path", COLLECTOR_CONFIGS, ids=lambda p: p.name)
def test_collector_config_components_are_defined_and_used(path: Path) -> None:
    """Every component a pipeline or service.extensions names is defined, and every defined one is used."""
    config = _load_yaml(path)
    service = config["service"]
    used: dict[str, set[str]] = {section: set() for section in SECTIONS}
    used["extensions"] = set(service.get("extensions") or [])
    connectors = set(config.get("connectors") or {})
    assert service["pipelines"], f"{path.name}: no pipelines"
    for name, pipeline in service["pipelines"].items():
        assert pipeline.get("receivers") and pipeline.get("exporters"), f"{path.name}: pipeline {name} is incomplete"
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section) or []:
                used["connectors" if component in connectors else section].add(component)
    for section in SECTIONS:
        defined = set(config.get(section) or {})
        assert used[section] <= defined, f"{path.name}: {section} used but not defined: {used[section] - defined}"
        assert defined <= used[section], f"{path.name}: {section} defined but never used: {defined - used[section]}"
    # memory_limiter runs first in every pipeline fed by a real receiver (it exists to refuse data before anything
    # else holds it). A pipeline fed by a connector has none: a refusal there would travel back to the receiver.
    for name, pipeline in service["pipelines"].items():
        processors = pipeline.get("processors") or []
        if set(pipeline["receivers"]) & connectors:
            assert not any(_component_type(p) == "memory_limiter" for p in processors), f"{path.name}: {name}"
        else:
            assert processors and _component_type(processors[0]) == "memory_limiter", f"{path.name}: {name}"
    assert any(_component_type(e) == "health_check" for e in used["extensions"]), path.name
    receivers = {_component_type(r): r for r in config["receivers"]}
    assert set(config["receivers"][receivers["otlp"]]["protocols"]) == {"grpc", "http"}, path.name


@pytest.mark.parametrize("path", COLLECTOR_CONFIGS, ids=lambda p: p.name)
def test_health_check_reports_component_status_and_metrics_are_published(path: Path) -> None:
    """health_check in component-status mode (/status), and the Collector's own metrics on :8888 for Prometheus."""
    config = _load_yaml(path)
    (health_id,) = [k for k in config["extensions"] if _component_type(k) == "health_check"]
    health = config["extensions"][health_id]
    assert health["use_v2"] is True and health["http"]["status"] == {"enabled": True, "path": "/status"}
    assert health["http"]["endpoint"].endswith(":13133")
    components = health["component_health"]
    assert components["include_permanent_errors"] is True and components["include_recoverable_errors"] is True
    readers = config["service"]["telemetry"]["metrics"]["readers"]
    prometheus = readers[0]["pull"]["exporter"]["prometheus"]
    assert prometheus["port"] == 8888 and prometheus["host"] == "0.0.0.0", "Prometheus in compose must reach it"


@pytest.mark.parametrize("path", CLICKHOUSE_CONFIGS, ids=lambda p: p.name)
def test_clickhouse_exporter_persists_retries_and_writes_the_project_tables(path: Path) -> None:
    """The clickhouse exporter leaves the schema alone, queues on disk with fsync, retries for a bounded time,
    and writes default.otel_traces with the Collector's own (non-admin) user."""
    config = _load_yaml(path)
    exporters = {k: v for k, v in config["exporters"].items() if _component_type(k) == "clickhouse"}
    assert len(exporters) == 1, f"{path.name}: expected one clickhouse exporter, got {sorted(exporters)}"
    (exporter,) = exporters.values()
    assert exporter["create_schema"] is False
    assert exporter.get("database", "default") == ddl.DEFAULT_DATABASE
    assert exporter.get("traces_table_name", "otel_traces") == ddl.DEFAULT_TABLE
    queue = exporter["sending_queue"]
    assert queue.get("enabled", True) is True
    assert queue.get("block_on_overflow", False) is False, "a full queue must answer the SDK (retry), not hang it"
    storage = queue["storage"]
    assert _component_type(storage) == "file_storage"
    assert storage in config["extensions"], f"{path.name}: queue storage {storage} is not defined"
    assert storage in config["service"]["extensions"], f"{path.name}: queue storage {storage} is not started"
    assert config["extensions"][storage]["fsync"] is True, "an acknowledged span must survive a power loss"
    retry = exporter["retry_on_failure"]
    assert retry["enabled"] is True
    # Bounded (0 would mean for ever: one bad batch would hold a queue consumer until someone deletes the queue),
    # and long enough to ride out a ClickHouse restart.
    assert 600 <= _seconds(retry["max_elapsed_time"]) <= 24 * 3600, retry["max_elapsed_time"]
    assert exporter["username"] == "${env:CLICKHOUSE_COLLECTOR_USER}"
    assert exporter["password"] == "${env:CLICKHOUSE_COLLECTOR_PASSWORD}"


def test_jaeger_has_its_own_path_that_cannot_push_back() -> None:
    """collector.yaml: the traces pipeline writes ClickHouse and feeds a forward connector; Jaeger's exporter sits in
    a second pipeline behind a batch processor, with an in-memory queue that drops when full. The batch processor
    accepts every batch and only logs its export errors, so a Jaeger outage never reaches the OTLP receiver
    (no SDK retry, no duplicate ClickHouse row)."""
    config = _load_yaml(COLLECTOR_CONFIGS[0])
    pipelines = config["service"]["pipelines"]
    connectors = set(config["connectors"])
    jaeger = [k for k in config["exporters"] if _component_type(k) in ("otlp", "otlp_grpc")]
    assert jaeger == ["otlp_grpc/jaeger"], "the OTLP gRPC exporter type is otlp_grpc (otlp is a deprecated alias)"
    exporter = config["exporters"]["otlp_grpc/jaeger"]
    assert exporter["endpoint"] == "jaeger:4317"
    assert exporter["tls"]["insecure"] is True
    queue = exporter["sending_queue"]
    assert queue["enabled"] is True and "storage" not in queue and queue.get("block_on_overflow", False) is False
    assert 0 < _seconds(exporter["retry_on_failure"]["max_elapsed_time"]) <= 600
    fed_by_otlp = [p for p in pipelines.values() if "otlp" in p["receivers"]]
    (ingest,) = fed_by_otlp
    assert any(_component_type(e) == "clickhouse" for e in ingest["exporters"])
    assert not any(e in jaeger for e in ingest["exporters"]), "Jaeger must not share the receiver's pipeline"
    (connector,) = [e for e in ingest["exporters"] if e in connectors]
    assert _component_type(connector) == "forward"
    (jaeger_pipeline,) = [p for p in pipelines.values() if connector in p["receivers"]]
    assert jaeger_pipeline["exporters"] == ["otlp_grpc/jaeger"]
    processors = jaeger_pipeline["processors"]
    assert processors and _component_type(processors[0]) == "batch", "the batch processor decouples Jaeger"
    assert not config["processors"][processors[0]].get("metadata_keys"), "one shard: consume never fails"


def test_gateway_config_targets_a_replicated_cluster() -> None:
    """gateway.yaml names the cluster and a Replicated engine, matching `otel-replay db init --cluster`."""
    config = _load_yaml(COLLECTOR_CONFIGS[1])
    (exporter,) = [v for k, v in config["exporters"].items() if _component_type(k) == "clickhouse"]
    cluster = exporter["cluster_name"]
    assert ddl.check_identifier(cluster) == cluster
    assert exporter["table_engine"]["name"].startswith("Replicated")
    rendered = ddl.render_script(cluster=cluster)
    assert f"ON CLUSTER `{cluster}`" in rendered and "ReplicatedMergeTree()" in rendered


# --------------------------------------------------------------------------------------------- compose file


def test_compose_images_are_pinned() -> None:
    """Every service's image has an explicit version tag (not `latest`, contains a digit)."""
    services = _compose()["services"]
    assert {"clickhouse", "collector", "jaeger", "grafana"} <= set(services)
    for name, service in services.items():
        image = service["image"]
        last = image.rsplit("/", 1)[-1]
        assert ":" in last, f"{name}: image {image} has no tag"
        tag = last.split(":", 1)[1].split("@", 1)[0]
        assert tag != "latest" and re.search(r"\d", tag), f"{name}: image {image} is not pinned"
    assert services["jaeger"]["image"].split(":")[-1].startswith("2."), "Jaeger v2"


def test_compose_published_ports_are_unique() -> None:
    """No two services publish the same host port."""
    seen: dict[str, str] = {}
    for name, service in _compose()["services"].items():
        for port in service.get("ports") or []:
            parts = str(port).split("/")[0].split(":")
            assert len(parts) >= 2, f"{name}: port {port} does not name its host port"
            host_port = parts[-2]
            assert host_port not in seen, f"host port {host_port} published by {seen.get(host_port)} and {name}"
            seen[host_port] = name
    assert {"4317", "4318", "8123", "16686", "3000"} <= set(seen)


def test_compose_bind_mounts_exist_and_named_volumes_are_declared() -> None:
    """Bind-mounted host paths exist in the repository; every named volume is declared at the top level."""
    compose = _compose()
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume["source"]
            if source.startswith((".", "/")):
                assert (ROOT / source).resolve().exists(), f"{name}: bind-mounted {source} is missing"
                assert (ROOT / source).resolve().is_relative_to(ROOT), f"{name}: {source} is outside the repo"
            else:
                assert source in declared, f"{name}: named volume {source} is not declared"
    for data_dir, service in (("/var/lib/clickhouse", "clickhouse"), ("/var/lib/grafana", "grafana")):
        mounts = {v.split(":")[1]: v.split(":")[0] for v in compose["services"][service]["volumes"]}
        assert mounts.get(data_dir) in declared, f"{service} data must live in a named volume"


def test_compose_collector_config_path_and_start_order() -> None:
    """The collector reads collector.yaml at the image's config path, after ClickHouse is healthy."""
    compose = _compose()
    collector = compose["services"]["collector"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in collector["volumes"]}
    assert Path(mounts[COLLECTOR_CONFIG_IN_CONTAINER]) == Path("./collector-config/collector.yaml")
    command = collector.get("command")
    if command:
        assert any(COLLECTOR_CONFIG_IN_CONTAINER in str(arg) for arg in command)
    assert collector["depends_on"]["clickhouse"]["condition"] == "service_healthy"
    # The image is FROM scratch: a shell healthcheck could never pass.
    assert "healthcheck" not in collector
    for name in ("clickhouse", "jaeger", "grafana"):
        test = compose["services"][name]["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL"), name
    # The feature gate of the health check's component-status mode, and memory limits that memory_limiter and the
    # Go runtime see (GOMEMLIMIT below the container limit).
    assert "--feature-gates=+extension.healthcheck.useComponentStatus" in command
    limit = _bytes(collector["mem_limit"])
    assert 0 < _bytes(collector["environment"]["GOMEMLIMIT"]) < limit
    # The persistent queue directory of collector.yaml is a named volume of the collector.
    config = _load_yaml(COLLECTOR_CONFIGS[0])
    storage = config["exporters"]["clickhouse"]["sending_queue"]["storage"]
    directory = config["extensions"][storage]["directory"]
    assert mounts.get(directory) in (compose.get("volumes") or {}), "queue directory must be a named volume"


def _bytes(size: str) -> int:
    """``1g``, ``512m`` (compose) or ``800MiB`` (Go) in bytes."""
    match = re.fullmatch(r"(\d+)\s*([kmgKMG])?(i?[bB])?", str(size))
    assert match, f"not a size: {size!r}"
    return int(match.group(1)) * int(1024 ** " kmg".index((match.group(2) or " ").lower()))


def test_compose_least_privilege_clickhouse_users() -> None:
    """The Collector writes as otel_collector and Grafana reads as grafana_reader, both defined in the mounted
    users.d file with their passwords from the environment; neither gets the admin's password."""
    import xml.etree.ElementTree as ET

    compose = _compose()
    services = compose["services"]
    raw = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    ch_mounts = {v.split(":")[1]: v.split(":")[0] for v in services["clickhouse"]["volumes"]}
    assert (ROOT / ch_mounts["/etc/clickhouse-server/users.d/otel-replay-users.xml"]).resolve() == USERS_XML
    users = ET.parse(USERS_XML).getroot().find("users")
    assert users is not None
    collector_user = users.find(services["collector"]["environment"]["CLICKHOUSE_COLLECTOR_USER"])
    grafana_user = users.find(services["grafana"]["environment"]["CLICKHOUSE_GRAFANA_USER"])
    assert collector_user is not None and grafana_user is not None
    for user, variable in (
        (collector_user, "CLICKHOUSE_COLLECTOR_PASSWORD"),
        (grafana_user, "CLICKHOUSE_GRAFANA_PASSWORD"),
    ):
        password = user.find("password")
        assert password is not None and password.get("from_env") == variable and not (password.text or "").strip()
        assert variable in raw["clickhouse"]["environment"], f"the server needs {variable} to create the user"
        assert user.findtext("access_management", "0") == "0"
    writer_grants = [q.text or "" for q in collector_user.iter("query")]
    assert writer_grants and all(
        re.fullmatch(r"GRANT (SELECT, )?INSERT ON default\.otel_traces\w*", g) for g in writer_grants
    )
    reader_grants = [q.text or "" for q in grafana_user.iter("query")]
    assert reader_grants == ["GRANT SELECT ON default.*"]
    profile = ET.parse(USERS_XML).getroot().find(f"profiles/{grafana_user.findtext('profile')}")
    assert profile is not None and profile.findtext("readonly") == "1"
    # Only the ClickHouse service knows the admin password; Grafana and the Collector get their own.
    for name in ("collector", "grafana"):
        assert "CLICKHOUSE_PASSWORD" not in raw[name]["environment"], name
    assert "CLICKHOUSE_COLLECTOR_PASSWORD" not in raw["grafana"]["environment"]


def test_compose_creates_the_schema_and_provisions_grafana() -> None:
    """ClickHouse runs the init SQL at first start; Grafana gets the provisioning folder and the dashboards."""
    services = _compose()["services"]
    ch_mounts = {v.split(":")[1]: v.split(":")[0] for v in services["clickhouse"]["volumes"]}
    init_dir = ROOT / ch_mounts["/docker-entrypoint-initdb.d"]
    assert INIT_SQL.resolve().parent == init_dir.resolve()
    grafana = services["grafana"]
    gf_mounts = {v.split(":")[1]: v.split(":")[0] for v in grafana["volumes"]}
    assert (ROOT / gf_mounts["/etc/grafana/provisioning"]).resolve() == DATASOURCE.parent.parent
    assert any(
        (ROOT / src).resolve() == ROOT / "dashboards" and dst != "/etc/grafana/provisioning"
        for dst, src in gf_mounts.items()
    ), "dashboards/ must be mounted for the dashboard provider"
    plugins = " ".join(
        str(grafana["environment"].get(k, ""))
        for k in ("GF_PLUGINS_PREINSTALL_SYNC", "GF_PLUGINS_PREINSTALL", "GF_INSTALL_PLUGINS")
    )
    assert re.search(r"grafana-clickhouse-datasource[@ ]\d", plugins), "plugin must be installed at a pinned version"


def test_dashboard_provider_reads_the_mounted_folder() -> None:
    """The dashboard provider file's path is where compose mounts dashboards/."""
    grafana = _compose()["services"]["grafana"]
    mounted = {v.split(":")[1] for v in grafana["volumes"] if (ROOT / v.split(":")[0]).resolve() == ROOT / "dashboards"}
    provider = _load_yaml(DASHBOARD_PROVIDER)
    paths = [p["options"]["path"] for p in provider["providers"]]
    assert paths and all(any(path.rstrip("/").startswith(m) for m in mounted) for path in paths), (paths, mounted)


def test_dashboards_default_to_the_provisioned_datasource() -> None:
    """Each dashboard's data source variable defaults to the uid and plugin of the provisioned data source."""
    dashboards = sorted((ROOT / "dashboards").glob("*.json"))
    assert dashboards
    (source,) = _load_yaml(DATASOURCE)["datasources"]
    (prometheus,) = _load_yaml(PROMETHEUS_DATASOURCE)["datasources"]
    provisioned = {source["type"]: source, prometheus["type"]: prometheus}
    for path in dashboards:
        variables = json.loads(path.read_text(encoding="utf-8")).get("templating", {}).get("list", [])
        for variable in (v for v in variables if v.get("type") == "datasource"):
            expected = provisioned[variable["query"]]
            assert variable["current"]["value"] == expected["uid"], f"{path.name}: default data source uid"
    scrape = _load_yaml(ROOT / "prometheus" / "prometheus.yml")["scrape_configs"]
    assert ["collector:8888"] in [job["static_configs"][0]["targets"] for job in scrape]
    assert prometheus["url"] == "http://prometheus:9090" and "prometheus" in _compose()["services"]


def test_env_example_defines_every_variable_compose_needs() -> None:
    """Variables without a default are in .env.example; documented defaults equal compose's own defaults."""
    env = _env_example()
    variables = _compose_variables()
    assert variables, "compose takes no settings from .env"
    for name, op, arg in variables:
        assert name in env, f"{name} is used by docker-compose.yml but not documented in .env.example"
        if op in (":-", "-"):
            assert env[name] == arg, f"{name}: .env.example says {env[name]!r}, compose defaults to {arg!r}"
        elif op in (":?", "?"):
            # A secret: no working placeholder ships, so a copied .env.example cannot start a stack.
            assert op == ":?" and env[name] == "", f"{name}: required in compose, so .env.example leaves it empty"
        else:
            assert env[name], f"{name} has no default in compose, so .env.example must give it a value"


def test_a_copied_env_example_does_not_start_the_stack() -> None:
    """With .env.example copied unchanged, compose stops at the first unset secret (`${VAR:?}` on an empty value)."""
    required = _required_variables()
    assert {"CLICKHOUSE_PASSWORD", "CLICKHOUSE_COLLECTOR_PASSWORD", "CLICKHOUSE_GRAFANA_PASSWORD"} <= required
    assert "GRAFANA_ADMIN_PASSWORD" in required
    with pytest.raises(AssertionError, match="has no value and no default"):
        _interpolate(COMPOSE.read_text(encoding="utf-8"), _env_example())
    for name in required:
        env = _env_example()
        env.update({other: "set" for other in required if other != name})
        with pytest.raises(AssertionError, match=name):
            _interpolate(COMPOSE.read_text(encoding="utf-8"), env)


def test_compose_has_no_literal_credentials() -> None:
    """Passwords in the compose file are variables without defaults (they come from .env only)."""
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    for name, service in compose["services"].items():
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) for item in environment)
        for key, value in environment.items():
            if "PASSWORD" in key:
                match = _COMPOSE_VAR.fullmatch(str(value))
                assert match and match.group(2) in (None, ":?", "?"), f"{name}: {key} must come from .env"
    live = "\n".join(ln for ln in COLLECTOR_CONFIGS[0].read_text().splitlines() if not ln.lstrip().startswith("#"))
    config_vars = set(re.findall(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)", live))
    assert config_vars <= set(compose["services"]["collector"]["environment"]), "collector.yaml needs these env vars"


# ---------------------------------------------------------------------------------------- Grafana data source


def test_grafana_datasource_uses_the_plugin_and_the_otel_schema() -> None:
    """The provisioned data source is the ClickHouse plugin, reads otel_traces as OTel, and holds no password."""
    datasources = _load_yaml(DATASOURCE)["datasources"]
    (source,) = datasources
    assert source["type"] == "grafana-clickhouse-datasource"
    json_data = source["jsonData"]
    assert json_data["host"] == "clickhouse" and json_data["protocol"] in ("native", "http")
    traces = json_data["traces"]
    assert traces["otelEnabled"] is True
    assert traces["defaultDatabase"] == ddl.DEFAULT_DATABASE and traces["defaultTable"] == ddl.DEFAULT_TABLE
    assert traces["durationUnit"] == "nanoseconds"
    password = str(source["secureJsonData"]["password"])
    match = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", password)
    assert match, "the data source password must be an environment reference, not a literal"
    assert "password" not in json_data
    grafana_env = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]["grafana"]["environment"]
    assert match.group(1) in grafana_env, "Grafana's container must receive the password variable"
    assert match.group(1) == "CLICKHOUSE_GRAFANA_PASSWORD", "Grafana reads with the read-only user"
    assert json_data["username"] == "${CLICKHOUSE_GRAFANA_USER}"


# -------------------------------------------------------------------------------------------- ClickHouse DDL


def test_committed_init_sql_is_the_generator_output() -> None:
    """clickhouse/init/01-otel-replay.sql is exactly `otel-replay db init --print` for the default settings."""
    assert INIT_SQL.read_text(encoding="utf-8") == ddl.render_script(), (
        "regenerate: otel-replay db init --print > clickhouse/init/01-otel-replay.sql"
    )


def test_committed_init_sql_runs_on_clickhouse(home: Path) -> None:
    """The committed statements run on chDB and build the same tables Store.open() creates.

    Run as committed (``IF NOT EXISTS`` over the store's own tables: they must parse and be accepted), then in
    a fresh database where they really create the tables, whose columns and engines must equal the store's.
    """
    statements = _sql_statements(INIT_SQL.read_text(encoding="utf-8"))
    assert len(statements) == 3
    store = Store.open(home=home)
    try:
        client = store.client
        for statement in statements:
            client.command(statement)
        client.command("CREATE DATABASE IF NOT EXISTS deploy_check")
        for statement in statements:
            client.command(statement.replace("`default`.", "`deploy_check`."))

        def shape(database: str) -> list[tuple[Any, ...]]:
            columns = client.query(
                "SELECT table, name, type, compression_codec FROM system.columns WHERE database = {db:String}"
                " ORDER BY table, position",
                parameters={"db": database},
            ).result_rows
            engines = client.query(
                "SELECT name, engine FROM system.tables WHERE database = {db:String} ORDER BY name",
                parameters={"db": database},
            ).result_rows
            return [*engines, *columns]

        built = shape("deploy_check")
        assert [row for row in built if len(row) == 2] == [
            ("otel_traces", "MergeTree"),
            ("otel_traces_trace_id_ts", "AggregatingMergeTree"),
            ("otel_traces_trace_id_ts_mv", "MaterializedView"),
        ]
        assert built == shape(ddl.DEFAULT_DATABASE)
        # The view feeds the lookup table: one span in, one trace id out.
        client.command(
            "INSERT INTO deploy_check.otel_traces (Timestamp, TraceId, SpanId, SpanName) "
            "VALUES (now64(9), '0123456789abcdef0123456789abcdef', '0123456789abcdef', 'invoke_agent x')"
        )
        rows = client.query("SELECT TraceId FROM deploy_check.otel_traces_trace_id_ts").result_rows
        assert rows == [("0123456789abcdef0123456789abcdef",)]
        client.command("DROP DATABASE deploy_check SYNC")
    finally:
        store.close()


def test_operations_doc_names_the_pinned_images() -> None:
    """docs/operations.md lists the images compose actually pins (the doc moves with the pins)."""
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "## Start the stack" in doc and "## Scale-out topology" in doc
    for name in ("clickhouse", "collector", "jaeger", "grafana", "prometheus"):
        image = _compose()["services"][name]["image"]
        assert f"`{image}`" in doc, f"docs/operations.md does not name {image}"
    plugin = _env_example()["GRAFANA_CLICKHOUSE_PLUGIN_VERSION"]
    assert f"grafana-clickhouse-datasource@{plugin}" in doc


# ------------------------------------------------------------------------------------- alerts and upgrades

PROMETHEUS_DIR = ROOT / "prometheus"
PUBLISHED_METRICS = json.loads((ROOT / "tests" / "data" / "collector_schema_v0.152.json").read_text(encoding="utf-8"))[
    "published_metrics"
]
# Metrics Prometheus itself writes for every scrape target (not the Collector's).
PROMETHEUS_OWN_METRICS = {"up"}


def _metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers not followed by ``(`` (a function), not PromQL keywords,
    and outside ``{…}`` label matchers, ``[…]`` ranges and ``by (…)`` groupings."""
    stripped = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\b(?:by|without)\s*\([^)]*\)", " ", expr)
    stripped = re.sub(r'"[^"]*"', " ", stripped)
    keywords = {"by", "without", "and", "or", "unless", "on", "ignoring", "group_left", "group_right", "bool", "offset"}
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", stripped))
    return {n for n in names if n not in keywords and not re.fullmatch(r"\d+[a-z]*", n)}


def test_alert_rules_parse_and_name_only_published_metrics() -> None:
    """prometheus/rules.yml parses as Prometheus rule groups, is loaded by prometheus.yml and mounted by compose,
    alerts on the queue fill ratio, dropped spans and refused spans, and names only metrics the Collector
    publishes (the list the pipeline dashboard row is checked against)."""
    prometheus = _load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    assert prometheus["rule_files"] == ["/etc/prometheus/rules.yml"]
    mounts = {
        v.split(":")[1]: (ROOT / v.split(":")[0]).resolve() for v in _compose()["services"]["prometheus"]["volumes"]
    }
    assert mounts["/etc/prometheus/rules.yml"] == PROMETHEUS_DIR / "rules.yml"
    rules = _load_yaml(PROMETHEUS_DIR / "rules.yml")
    assert set(rules) == {"groups"} and rules["groups"]
    alerts: dict[str, str] = {}
    for group in rules["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit"} and group["name"] and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule
            assert rule["alert"] not in alerts, f"alert {rule['alert']} defined twice"
            if "for" in rule:
                assert _seconds(rule["for"]) > 0
            assert rule["expr"].count("(") == rule["expr"].count(")"), rule["alert"]
            alerts[rule["alert"]] = rule["expr"]
    published = set(PUBLISHED_METRICS["names"])
    for name, expr in alerts.items():
        used = _metric_names(expr)
        assert used, f"{name}: no metric in {expr!r}"
        assert used <= published | PROMETHEUS_OWN_METRICS, f"{name}: unpublished metrics {used - published}"
        grouped = re.findall(r"\bby \(([a-z_, ]+)\)", expr)
        for labels in grouped:
            assert {lab.strip() for lab in labels.split(",")} <= set(PUBLISHED_METRICS["labels"]), (name, labels)
    exprs = " ".join(alerts.values())
    assert re.search(r"otelcol_exporter_queue_size\s*/\s*otelcol_exporter_queue_capacity", exprs), "fill ratio"
    assert "otelcol_exporter_send_failed_spans_total" in exprs and "otelcol_receiver_refused_spans_total" in exprs
    # The scan is not vacuous: a misspelt metric is reported.
    assert _metric_names("sum by (exporter) (rate(otelcol_exporter_sent_span_total[5m])) > 0") == {
        "otelcol_exporter_sent_span_total"
    }


def test_the_pinned_collector_is_the_one_the_docs_reasoned_about() -> None:
    """The Jaeger decoupling and the retry cap were reasoned about for one Collector version (docs/operations.md,
    "Upgrading the Collector"): the compose pin, the key schema and the docs name the same version, and
    batch/jaeger is the fire-and-forget `batch` processor. A bumped pin fails here until the docs are re-read."""
    image = _compose()["services"]["collector"]["image"]
    version = image.rsplit(":", 1)[1]
    schema = json.loads((ROOT / "tests" / "data" / f"collector_schema_v{version.rsplit('.', 1)[0]}.json").read_text())
    assert schema["collector_image"] == image
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = doc.split("## Upgrading the Collector", 1)[1].split("\n## ", 1)[0]
    assert f"`{image}`" in section, "docs/operations.md, 'Upgrading the Collector', must name the pinned image"
    assert "wait_for_result" in section and "block_on_overflow" in section
    config = _load_yaml(COLLECTOR_CONFIGS[0])
    jaeger_processors = config["service"]["pipelines"]["traces/jaeger"]["processors"]
    assert jaeger_processors == ["batch/jaeger"], "the decoupling the docs describe is the batch processor"
    assert _component_type(jaeger_processors[0]) == "batch"
    assert "UPGRADE WARNING" in COLLECTOR_CONFIGS[0].read_text(encoding="utf-8")


def test_agent_listens_on_the_pod_address_the_docs_describe() -> None:
    """agent.yaml's receivers listen on ${env:MY_POD_IP} (reachable from other pods through hostPort), and the
    operations guide shows the downward-API snippet that sets it."""
    agent = _load_yaml(COLLECTOR_CONFIGS[2])
    for protocol, port in (("grpc", 4317), ("http", 4318)):
        assert agent["receivers"]["otlp"]["protocols"][protocol]["endpoint"] == f"${{env:MY_POD_IP}}:{port}"
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "name: MY_POD_IP" in doc and "fieldPath: status.podIP" in doc and "hostPort: 4317" in doc
