"""The deployment files hold up without an engine to run them (issue 15 item 3).

``docker-compose.yml`` is validated against the compose specification's JSON schema (the copy
check-jsonschema vendors) and ``deploy/k8s/`` against the Kubernetes resource schemas
(kubernetes-validate, strict: an unknown field fails), after rendering the kustomization the
way kustomize does for the features it uses. Both name only settings the code reads, only
secret files ``longhaul nats-auth`` writes, and NATS configurations the real nats-server
accepts (``nats-server -t``); the cluster is three nodes at R3 whose routes name every node.
"""

from __future__ import annotations

import base64
import importlib.resources
import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from longhaul.core.config import LonghaulConfig
from longhaul.core.nats_auth import write_deployment
from longhaul.domain.names import Names
from longhaul.executor.settings import ExecutorSettings
from longhaul.llm.registry import DEFAULT_BASE_URLS
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
K8S = ROOT / "deploy" / "k8s"
NATS_SERVER = Path(sys.executable).with_name("nats-server")
SERVICES = ("gateway", "planner", "executor", "verifier")
K8S_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())
"""The oldest Kubernetes the manifests are meant for, and the newest the validator knows."""


# ---- settings names ------------------------------------------------------------------------


@cache
def source_literals() -> frozenset[str]:
    """Environment names the code reads directly (``os.environ.get("LONGHAUL_MODEL")`` …)."""
    names: set[str] = set()
    for path in [*ROOT.glob("libs/*/src/**/*.py"), *ROOT.glob("services/*/src/**/*.py")]:
        names.update(re.findall(r"[\"']([A-Z][A-Z0-9_]+)[\"']", path.read_text()))
    return frozenset(names)


def _has_path(model: type[BaseModel], parts: list[str]) -> bool:
    field = model.model_fields.get(parts[0])
    if field is None:
        return False
    if len(parts) == 1:
        return True
    annotation = field.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _has_path(annotation, parts[1:])
    return getattr(annotation, "__origin__", None) is dict


def is_setting(name: str) -> bool:
    """Whether a service reads environment variable ``name``: a ``LONGHAUL_*`` path into the
    configuration (``__`` between levels), an executor setting, a provider's endpoint
    variable, or a name the code reads itself."""
    if name in source_literals():
        return True
    if name.startswith("LONGHAUL_EXECUTOR__"):
        return name.removeprefix("LONGHAUL_EXECUTOR__").lower() in ExecutorSettings.model_fields
    if name.startswith("LONGHAUL_"):
        return _has_path(LonghaulConfig, name.removeprefix("LONGHAUL_").lower().split("__"))
    return any(name in (f"{k.upper()}_API_KEY", f"{k.upper()}_BASE_URL") for k in DEFAULT_BASE_URLS)


@pytest.mark.parametrize(
    ("name", "real"),
    [
        ("LONGHAUL_NATS__REPLICAS", True),
        ("LONGHAUL_NATS__REPLICA", False),
        ("LONGHAUL_PIPELINE__LOOP_DETECTION__THRESHOLD", True),
        ("LONGHAUL_PIPELINE__LOOP_DETECTION__THRESHOLDS", False),
        ("LONGHAUL_EXECUTOR__METRICS_PORT", True),
        ("LONGHAUL_EXECUTOR__METRIC_PORT", False),
        ("LONGHAUL_API_KEYS", True),
        ("OPENAI_API_KEY", True),
        ("OPENAI_KEY", False),
    ],
)
def test_the_settings_check_tells_real_names(name: str, real: bool) -> None:
    assert is_setting(name) is real


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What ``longhaul nats-auth --out`` writes, plus the API key file the k8s README asks for."""
    directory = tmp_path_factory.mktemp("secrets")
    write_deployment(directory, Names(""))
    (directory / "api-keys.env").write_text("LONGHAUL_API_KEYS=k8s-test-key\n")
    return directory


def env_file_names(path: Path) -> list[str]:
    return [line.split("=", 1)[0] for line in path.read_text().splitlines() if "=" in line]


def nats_config_is_valid(conf: Path, secrets: Path, tmp: Path, **env: str) -> None:
    """``nats-server -t`` on ``conf`` with the generated users beside it (its include)."""
    shutil.copy(conf, tmp / conf.name)
    shutil.copy(secrets / "nats-auth.conf", tmp / "nats-auth.conf")
    result = subprocess.run(
        [str(NATS_SERVER), "-t", "-c", str(tmp / conf.name)],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def routes_of(conf: Path) -> list[str]:
    block = re.search(r"routes:\s*\[(.*?)\]", conf.read_text(), re.DOTALL)
    assert block, f"{conf} has no cluster routes"
    return block.group(1).split()


# ---- docker compose ------------------------------------------------------------------------


@cache
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def test_compose_matches_the_compose_specification() -> None:
    schema_file = importlib.resources.files("check_jsonschema") / (
        "builtin_schemas/vendor/compose-spec.json"
    )
    schema = json.loads(schema_file.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(compose())]
    assert not errors, errors


def _nats_nodes() -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose()["services"].items()
        if str(service.get("image", "")).startswith("nats:")
    }


def test_compose_runs_a_three_node_jetstream_cluster_at_r3(
    secrets_dir: Path, tmp_path: Path
) -> None:
    nodes = _nats_nodes()
    assert sorted(nodes) == ["nats-1", "nats-2", "nats-3"]
    mounts: set[str] = set()
    for name, node in nodes.items():
        assert node["environment"]["NATS_SERVER_NAME"] == name
        assert "/healthz" in " ".join(node["healthcheck"]["test"])
        assert any(v.endswith(":/data") and not v.startswith(".") for v in node["volumes"])
        mounts.update(v.split(":")[0] for v in node["volumes"] if v.startswith("./"))
    conf = ROOT / "deploy" / "nats" / "cluster.conf"
    assert mounts == {"./deploy/nats/cluster.conf", "./deploy/secrets/nats-auth.conf"}
    assert sorted(routes_of(conf)) == [f"nats://{name}:6222" for name in sorted(nodes)]
    nats_config_is_valid(conf, secrets_dir, tmp_path, NATS_SERVER_NAME="nats-1")
    for name in SERVICES:
        service = compose()["services"][name]
        env = service["environment"]
        assert env["LONGHAUL_NATS__REPLICAS"] == "3"
        assert sorted(env["LONGHAUL_NATS__URL"].split(",")) == [
            f"nats://{node}:4222" for node in sorted(nodes)
        ]
        assert set(service["depends_on"]) == set(nodes)


def test_compose_services_scale_and_report_health() -> None:
    services = compose()["services"]
    assert set(SERVICES) <= set(services)
    executor = services["executor"]
    assert executor["deploy"]["replicas"] >= 2
    # a fixed name or host port would stop `--scale executor=N`
    assert "container_name" not in executor and "ports" not in executor
    assert "/readyz" in " ".join(services["gateway"]["healthcheck"]["test"])
    port = executor["environment"]["LONGHAUL_EXECUTOR__METRICS_PORT"]
    assert f":{port}/metrics" in " ".join(executor["healthcheck"]["test"])
    # every replica (and the verifier's command checks) sees the same working directories
    root = executor["environment"]["LONGHAUL_WORKING_ROOT"]
    for name in ("executor", "verifier"):
        assert any(v.endswith(f":{root}") for v in services[name]["volumes"])


def test_compose_names_only_real_settings_and_generated_secrets(secrets_dir: Path) -> None:
    services = compose()["services"]
    for name in SERVICES:
        service = services[name]
        env_file = Path(service["env_file"])
        assert env_file.parent == Path("deploy/secrets")
        assert (secrets_dir / env_file.name).is_file(), f"nats-auth writes no {env_file.name}"
        names = [*service["environment"], *env_file_names(secrets_dir / env_file.name)]
        unknown = [n for n in names if not is_setting(n)]
        assert not unknown, f"{name}: settings no code reads: {unknown}"


# ---- Kubernetes ----------------------------------------------------------------------------

KUSTOMIZATION_FIELDS = {
    "apiVersion",
    "kind",
    "resources",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
}


def _generated(kind: str, spec: dict[str, Any], base: Path) -> dict[str, Any]:
    assert set(spec) <= {"name", "files", "envs"}, spec
    data: dict[str, str] = {}
    for file in spec.get("files", []):
        data[Path(file).name] = (base / file).read_text()
    for env in spec.get("envs", []):
        for line in (base / env).read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                data[key] = value
    if kind == "Secret":
        encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": spec["name"]},
                "type": "Opaque", "data": encoded}  # fmt: skip
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": spec["name"]}, "data": data}


def render(base: Path) -> list[dict[str, Any]]:
    """``kustomize build`` for what our kustomization uses: resources and generators with
    stable names. Anything else in it fails here rather than being silently ignored."""
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text())
    assert set(kustomization) <= KUSTOMIZATION_FIELDS, set(kustomization) - KUSTOMIZATION_FIELDS
    assert kustomization["generatorOptions"] == {"disableNameSuffixHash": True}
    objects = [
        document
        for resource in kustomization["resources"]
        for document in yaml.safe_load_all((base / resource).read_text())
        if document
    ]
    objects += [_generated("ConfigMap", s, base) for s in kustomization["configMapGenerator"]]
    objects += [_generated("Secret", s, base) for s in kustomization["secretGenerator"]]
    return objects


@pytest.fixture(scope="module")
def manifests(secrets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    base = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(K8S, base, ignore=shutil.ignore_patterns("secrets"))
    shutil.copytree(secrets_dir, base / "secrets")
    return render(base)


def find(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    pod: list[dict[str, Any]] = workload["spec"]["template"]["spec"]["containers"]
    return pod


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_manifests_match_the_kubernetes_schemas(
    manifests: list[dict[str, Any]], version: str
) -> None:
    for manifest in manifests:
        kubernetes_validate.validate(manifest, version, strict=True)


def test_k8s_nats_is_a_three_node_cluster_at_r3(
    manifests: list[dict[str, Any]], secrets_dir: Path, tmp_path: Path
) -> None:
    nats = find(manifests, "StatefulSet", "nats")
    replicas = nats["spec"]["replicas"]
    assert replicas == 3
    service = find(manifests, "Service", nats["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    conf = K8S / "nats.conf"
    headless = service["metadata"]["name"]
    pods = [f"nats-{i}.{headless}" for i in range(replicas)]
    assert routes_of(conf) == [f"nats://{pod}:6222" for pod in pods]
    nats_config_is_valid(conf, secrets_dir, tmp_path, POD_NAME="nats-0")
    (container,) = containers(nats)
    assert container["readinessProbe"]["httpGet"]["path"].startswith("/healthz")
    assert nats["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    config = find(manifests, "ConfigMap", "longhaul-config")["data"]
    assert config["LONGHAUL_NATS__REPLICAS"] == "3"
    assert config["LONGHAUL_NATS__URL"].split(",") == [f"nats://{pod}:4222" for pod in pods]


def test_k8s_services_are_ready_on_readyz_and_executors_autoscale(
    manifests: list[dict[str, Any]],
) -> None:
    for name in SERVICES:
        find(manifests, "Deployment", name)
    (gateway,) = containers(find(manifests, "Deployment", "gateway"))
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    hpa = find(manifests, "HorizontalPodAutoscaler", "executor")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "executor")
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    (executor,) = containers(find(manifests, "Deployment", "executor"))
    assert executor["resources"]["requests"]["cpu"], "a CPU target needs a CPU request"


def test_k8s_references_resolve_and_secrets_hold_credentials(
    manifests: list[dict[str, Any]],
) -> None:
    """Every ConfigMap, Secret and claim a pod names exists; API keys and each service's NATS
    user come from Secrets, never from the ConfigMap."""
    for workload in [m for m in manifests if m["kind"] in ("Deployment", "StatefulSet")]:
        pod = workload["spec"]["template"]["spec"]
        for container in pod["containers"]:
            for source in container.get("envFrom", []):
                kind = "ConfigMap" if "configMapRef" in source else "Secret"
                ref = source.get("configMapRef") or source["secretRef"]
                find(manifests, kind, ref["name"])
        for volume in pod.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                find(
                    manifests, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]
                )
            for source in volume.get("projected", {}).get("sources", []):
                kind = "ConfigMap" if "configMap" in source else "Secret"
                find(manifests, kind, (source.get("configMap") or source["secret"])["name"])
    config = find(manifests, "ConfigMap", "longhaul-config")["data"]
    assert not any("PASSWORD" in k or "API_KEY" in k for k in config)
    for name in SERVICES:
        (container,) = containers(find(manifests, "Deployment", name))
        secrets = {s["secretRef"]["name"] for s in container["envFrom"] if "secretRef" in s}
        assert f"nats-user-{name}" in secrets
    (gateway,) = containers(find(manifests, "Deployment", "gateway"))
    assert "longhaul-api-keys" in {s.get("secretRef", {}).get("name") for s in gateway["envFrom"]}


def test_k8s_names_only_real_settings(manifests: list[dict[str, Any]]) -> None:
    names: list[str] = list(find(manifests, "ConfigMap", "longhaul-config")["data"])
    for manifest in manifests:
        if manifest["kind"] == "Secret" and manifest["metadata"]["name"] != "nats-auth":
            names += manifest["data"]
    for name in SERVICES:
        (container,) = containers(find(manifests, "Deployment", name))
        names += [e["name"] for e in container.get("env", [])]
    unknown = sorted({n for n in names if not is_setting(n)})
    assert not unknown, f"settings no code reads: {unknown}"


# ---- the sandbox's seccomp profile ---------------------------------------------------------

SECCOMP = ROOT / "deploy" / "seccomp" / "longhaul-sandbox.json"
SANDBOXED = ("executor", "verifier")
"""The services whose tools run under bubblewrap (bash, command checks)."""
BWRAP_NEEDS = ("clone", "clone3", "unshare", "mount", "umount2", "pivot_root", "setns")
ACTION = {"enum": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_LOG"]}
PROFILE_SCHEMA = {
    "type": "object",
    "required": ["defaultAction", "syscalls"],
    "additionalProperties": False,
    "properties": {
        "defaultAction": ACTION,
        "syscalls": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["names", "action"],
                "additionalProperties": False,
                "properties": {
                    "names": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "action": ACTION,
                    "errnoRet": {"type": "integer"},
                    "args": {"type": "array"},
                    "comment": {"type": "string"},
                },
            },
        },
    },
}
"""The part of Docker's seccomp profile format (moby's profiles/seccomp) the profile uses."""


def denied_by(profile: dict[str, Any]) -> set[str]:
    """The syscalls the profile refuses whatever their arguments."""
    rules = {n: r["action"] for r in profile["syscalls"] if not r.get("args") for n in r["names"]}
    names = set(rules) | set(BWRAP_NEEDS)
    return {n for n in names if rules.get(n, profile["defaultAction"]) != "SCMP_ACT_ALLOW"}


def test_the_seccomp_profile_lets_bubblewrap_work_and_refuses_the_hosts_syscalls() -> None:
    profile = json.loads(SECCOMP.read_text())
    jsonschema.validate(profile, PROFILE_SCHEMA)
    denied = denied_by(profile)
    assert not denied & set(BWRAP_NEEDS), denied & set(BWRAP_NEEDS)
    assert {"kexec_load", "init_module", "reboot", "bpf", "open_by_handle_at"} <= denied


def test_compose_runs_the_sandboxed_services_under_the_profile() -> None:
    for name in SANDBOXED:
        options = compose()["services"][name]["security_opt"]
        profiles = [o.removeprefix("seccomp=") for o in options if o.startswith("seccomp=")]
        assert [(COMPOSE.parent / p).resolve() for p in profiles] == [SECCOMP], name


def test_k8s_runs_the_sandboxed_services_under_the_profile(
    manifests: list[dict[str, Any]],
) -> None:
    for name in SANDBOXED:
        pod = find(manifests, "Deployment", name)["spec"]["template"]["spec"]
        profile = pod["securityContext"]["seccompProfile"]
        assert profile["type"] == "Localhost", name
        assert Path(profile["localhostProfile"]).name == SECCOMP.name, name


# ---- least privilege and honest health (issue 42) -------------------------------------------

SANDBOX_CHECK = "python -m longhaul.agent.tools.sandbox"
COMPOSE_SANDBOX_OPTIONS = {
    "seccomp=./deploy/seccomp/longhaul-sandbox.json",
    "no-new-privileges:true",
}
"""Every option the sandboxed services get, each explained beside it in docker-compose.yml."""


def test_compose_grants_the_sandbox_what_it_needs_and_nothing_more() -> None:
    services = compose()["services"]
    for name in SERVICES:
        service = services[name]
        assert service.get("cap_drop") == ["ALL"], name
        assert not service.get("cap_add") and not service.get("privileged"), name
        expected = COMPOSE_SANDBOX_OPTIONS if name in SANDBOXED else {"no-new-privileges:true"}
        assert set(service["security_opt"]) == expected, name
    # each option of the sandboxed services is explained where it is set
    text = COMPOSE.read_text()
    for option in COMPOSE_SANDBOX_OPTIONS - {"no-new-privileges:true"}:
        line = next(i for i, row in enumerate(text.splitlines()) if option in row)
        assert text.splitlines()[line - 1].strip().startswith("#"), option


def test_compose_health_checks_fail_on_degraded() -> None:
    services = compose()["services"]
    gateway = " ".join(services["gateway"]["healthcheck"]["test"])
    assert "/readyz" in gateway and "['status'] == 'ok'" in gateway
    for name in SANDBOXED:
        assert SANDBOX_CHECK in " ".join(services[name]["healthcheck"]["test"]), name


def test_k8s_grants_the_sandbox_what_it_needs_and_nothing_more(
    manifests: list[dict[str, Any]],
) -> None:
    for name in SERVICES:
        pod = find(manifests, "Deployment", name)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, name
        assert context["capabilities"] == {"drop": ["ALL"]}, name
        assert not context.get("privileged") and "add" not in context["capabilities"], name
        sandboxed = name in SANDBOXED
        assert (context.get("procMount") == "Unmasked") is sandboxed, name
        # the kubelet allows an unmasked /proc only in a pod with its own user namespace
        assert (pod.get("hostUsers") is False) is sandboxed, name
        if sandboxed:
            probe = " ".join(container["readinessProbe"]["exec"]["command"])
            assert SANDBOX_CHECK in probe, name


def test_the_build_context_leaves_out_secrets_and_the_virtualenv() -> None:
    rules = (ROOT / ".dockerignore").read_text().split()
    assert rules[rules.index("*") :][:1] == ["*"]  # everything out, then what the image needs
    allowed = {rule.removeprefix("!") for rule in rules if rule.startswith("!")}
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), re.M)
    assert {part for line in copied for part in line.split()} <= allowed
    assert not any(rule.startswith("!deploy") or rule.startswith("!.venv") for rule in rules)


def test_the_sandbox_check_says_degraded_and_fails_without_bubblewrap(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "longhaul.agent.tools.sandbox"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("degraded: unavailable: bubblewrap"), done.stdout
    opted_out = subprocess.run(
        [sys.executable, "-m", "longhaul.agent.tools.sandbox"],
        env={**env, "LONGHAUL_SANDBOX__MODE": "none"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert opted_out.returncode == 0 and opted_out.stdout.startswith("off:"), opted_out.stdout


def test_the_image_gives_its_user_a_writable_data_dir_the_verifier_keeps(
    manifests: list[dict[str, Any]],
) -> None:
    """The code lives in /app, read-only to the image's user: the data dir (the verifier's
    command-check spools) is a directory of its own, which compose and k8s mount a volume on."""
    dockerfile = DOCKERFILE.read_text()
    [data_dir] = re.findall(r"LONGHAUL_DATA_DIR=(\S+)", dockerfile)
    assert is_setting("LONGHAUL_DATA_DIR")
    assert re.search(
        rf"mkdir [^\n]*{data_dir}\b[^\n]*&& chown longhaul:longhaul [^\n]*{data_dir}", dockerfile
    )
    assert any(v.endswith(f":{data_dir}") for v in compose()["services"]["verifier"]["volumes"])
    (verifier,) = containers(find(manifests, "Deployment", "verifier"))
    assert data_dir in [mount["mountPath"] for mount in verifier["volumeMounts"]]


def test_make_deploy_test_fails_loudly_without_a_container_engine(tmp_path: Path) -> None:
    """`make deploy-test` never passes without an engine: no docker on PATH is exit 1, saying so."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.deploy"],
        cwd=ROOT,
        env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAILED: no container engine answers" in done.stderr, done.stderr
