"""The Kubernetes deployment (deploy/k8s) and its image (Dockerfile), checked offline.

No cluster and no container engine run here: each manifest is validated against the
Kubernetes schemas that kubernetes-validate bundles, and the numbers that matter (requests,
limits, replicas, the autoscaler's bounds) are compared with deploy/README.md's sizing table.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from alibi_viz_app.testing import ROOT

K8S = ROOT / "deploy" / "k8s"
README = ROOT / "deploy" / "README.md"
DOCKERFILE = ROOT / "Dockerfile"
# A release that clusters of 2026 run and that kubernetes-validate bundles (1.25 to 1.37 in
# its 1.37.0); strict: a field the schema does not know (a typo) fails.
KUBERNETES_VERSION = "1.33.0"
HEALTH = "/_stcore/health"
STUDENT_ROWS = (30, 100, 300)


def manifest_files() -> list[Path]:
    """Every Kubernetes manifest under deploy/k8s (the kustomizations are not resources)."""
    return sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml")


def load(name: str) -> dict:
    return yaml.safe_load((K8S / name).read_text())


def app_container(deployment: dict) -> dict:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def cores(quantity: str) -> float:
    """A CPU quantity ("1", "500m") in cores."""
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def mebibytes(quantity: str) -> int:
    """A memory quantity in MiB; only the Mi and Gi suffixes are used here."""
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()
    return int(number) * (1024 if unit == "Gi" else 1)


def readme_tables() -> list[tuple[list[str], list[list[str]]]]:
    """The markdown tables of the README's Kubernetes section, each (its header's cells, its
    rows of cells; the separator row left out)."""
    section = README.read_text().split("## Kubernetes (a lecture hall)", 1)[1]
    tables, rows = [], []
    for line in section.splitlines() + [""]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            tables.append((rows[0], rows[2:]))
            rows = []
    return tables


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def sizing() -> tuple[dict, dict]:
    """(per replica: {"CPU (cores)": (request, limit), ...}, {students: row}) from the README."""
    per_replica = class_rows = None
    for header, rows in readme_tables():
        if header[0] == "per replica":
            per_replica = {row[0]: row[1:] for row in rows}
        if header[:2] == ["students", "replicas"]:
            class_rows = {int(row[0]): [number(cell) for cell in row[1:]] for row in rows}
    assert per_replica and class_rows, "deploy/README.md has lost its sizing tables"
    return per_replica, class_rows


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(K8S)))
def test_manifest_validates_against_the_bundled_schema(path):
    """Each document of each manifest is a valid object of Kubernetes 1.33, no unknown field."""
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert documents
    for doc in documents:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_validation_catches_a_misspelt_field():
    """The check above is not vacuous: a typo in the Deployment fails it."""
    deployment = load("deployment.yaml")
    app_container(deployment)["resourcse"] = app_container(deployment).pop("resources")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("folder", sorted({p.parent for p in K8S.rglob("kustomization.yaml")}),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_kustomization_lists_every_manifest_of_its_folder(folder):
    """`kubectl apply -k` applies exactly the files of the folder: none forgotten, none stray."""
    listed = yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]
    present = sorted(p.name for p in folder.iterdir()
                     if p.is_file() and p.name != "kustomization.yaml")
    assert sorted(listed) == present


def test_requests_limits_and_replicas_match_the_sizing_table():
    """The Deployment's resources and replicas and the autoscaler's bounds are the README's."""
    per_replica, class_rows = sizing()
    container = app_container(load("deployment.yaml"))
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    assert cores(requests["cpu"]) == number(per_replica["CPU (cores)"][0])
    assert cores(limits["cpu"]) == number(per_replica["CPU (cores)"][1])
    assert mebibytes(requests["memory"]) == number(per_replica["memory (MiB)"][0])
    assert mebibytes(limits["memory"]) == number(per_replica["memory (MiB)"][1])

    students_per_replica = number(per_replica["students"][0])
    assert sorted(class_rows) == list(STUDENT_ROWS)
    for students, (replicas, cpu, memory, memory_limits) in class_rows.items():
        assert replicas == math.ceil(students / students_per_replica), students
        assert cpu == replicas * cores(requests["cpu"]), students
        assert memory == replicas * mebibytes(requests["memory"]), students
        assert memory_limits == replicas * mebibytes(limits["memory"]), students

    hpa = load("hpa.yaml")["spec"]
    assert load("deployment.yaml")["spec"]["replicas"] == class_rows[30][0]
    assert hpa["minReplicas"] == class_rows[30][0]
    assert hpa["maxReplicas"] == class_rows[300][0]
    assert hpa["scaleTargetRef"]["name"] == load("deployment.yaml")["metadata"]["name"]
    assert [m["resource"]["name"] for m in hpa["metrics"]] == ["cpu"]


def test_memory_budget_is_run_shs():
    """Replicas get the fixed model-run budget that deploy/run.sh gives its replicas."""
    run_sh = (ROOT / "deploy" / "run.sh").read_text()
    budget = re.search(r"ALIBI_VIZ_MEMORY_BUDGET_MB=\"\$\{ALIBI_VIZ_MEMORY_BUDGET_MB:-(\d+)\}\"",
                       run_sh).group(1)
    env = {e["name"]: e.get("value") for e in app_container(load("deployment.yaml"))["env"]}
    assert env["ALIBI_VIZ_MEMORY_BUDGET_MB"] == budget


def test_probes_ask_streamlits_health_on_the_container_port():
    """Startup, readiness and liveness all GET /_stcore/health on the port the app listens on."""
    container = app_container(load("deployment.yaml"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8501}
    assert "--server.port\", \"8501\"" in DOCKERFILE.read_text()
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["path"] == HEALTH, probe
        assert ports.get(get["port"], get["port"]) == 8501, probe


def test_pods_drain_before_they_stop():
    """A preStop pause shorter than the grace period, so running reruns can finish."""
    deployment = load("deployment.yaml")
    pause = app_container(deployment)["lifecycle"]["preStop"]["exec"]["command"]
    assert pause[0] == "sleep"
    assert 0 < int(pause[1]) < deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]


def test_ingress_keeps_a_browser_on_its_pod_and_its_websocket_open():
    """Cookie affinity, and a day's read and send timeouts for Streamlit's websocket."""
    ingress = load("ingress.yaml")
    annotations = ingress["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    assert annotations[prefix + "affinity"] == "cookie"
    assert annotations[prefix + "session-cookie-name"]
    assert annotations[prefix + "affinity-mode"] == "persistent"
    assert annotations[prefix + "proxy-read-timeout"] == "86400"
    assert annotations[prefix + "proxy-send-timeout"] == "86400"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert path["backend"]["service"]["name"] == load("service.yaml")["metadata"]["name"]


def test_gzip_is_in_the_controller_config():
    """gzip, which ingress-nginx takes only from its ConfigMap, is set in the optional folder."""
    data = yaml.safe_load((K8S / "ingress-nginx" / "controller-config.yaml").read_text())["data"]
    assert data["use-gzip"] == "true"
    assert "application/javascript" in data["gzip-types"]


def numeric_user(dockerfile: str) -> int:
    """The uid of the Dockerfile's last USER instruction; fails when it is a name."""
    users = re.findall(r"^USER\s+(\S+)", dockerfile, flags=re.M)
    assert users, "the Dockerfile has no USER: the image would run as root"
    return int(users[-1].split(":")[0])


@pytest.mark.parametrize("name", ["deployment.yaml", "redis-statefulset.yaml"])
def test_pods_run_as_a_numeric_non_root_user_on_a_read_only_root(name):
    """runAsNonRoot with a uid, no privilege escalation, no capabilities, read-only root; the
    app's uid is the image's own, and its writable folders are emptyDirs."""
    spec = load(name)["spec"]["template"]["spec"]
    security = spec["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] > 0
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
    if name == "deployment.yaml":
        assert security["runAsUser"] == numeric_user(DOCKERFILE.read_text())
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in app_container(load(name))["volumeMounts"]}
        env = {e["name"]: e.get("value") for e in app_container(load(name))["env"]}
        for folder in ("/tmp", env["HOME"]):
            assert "emptyDir" in volumes[mounts[folder]], folder


def test_replicas_use_the_redis_of_the_kustomization():
    """ALIBI_VIZ_CLASS_STORE comes from the kustomization's one setting, which names the
    Redis Service of this folder."""
    kustomization = load("kustomization.yaml")
    (generator,) = kustomization["configMapGenerator"]
    (literal,) = generator["literals"]
    assert literal.startswith("ALIBI_VIZ_CLASS_STORE=redis://")
    redis = load("redis-service.yaml")
    assert literal == (f"ALIBI_VIZ_CLASS_STORE=redis://{redis['metadata']['name']}:"
                       f"{redis['spec']['ports'][0]['port']}/0")
    env = {e["name"]: e for e in app_container(load("deployment.yaml"))["env"]}
    ref = env["ALIBI_VIZ_CLASS_STORE"]["valueFrom"]["configMapKeyRef"]
    assert ref == {"name": generator["name"], "key": "ALIBI_VIZ_CLASS_STORE"}
    claim = load("redis-statefulset.yaml")["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"]


def test_dockerfile_pins_torch_as_the_lock_and_runs_make_runs_server():
    """The image installs the app's lock and takes torch's pin from it (no second version to
    drift), copies both packages, runs as a non-root uid, and starts
    `python -m alibi_viz_app.serve` like make run."""
    dockerfile = DOCKERFILE.read_text()
    assert "pip install -r requirements.lock" in dockerfile
    assert re.search(r"grep -E '\^torch==' requirements.lock", dockerfile)
    assert not re.search(r"torch==\d", dockerfile), "a torch version written in the Dockerfile"
    assert re.search(r"^torch==2\.13\.0", (ROOT / "requirements.lock").read_text(), flags=re.M)
    copied = re.findall(r"^COPY (\S+) ", dockerfile, flags=re.M)
    assert {"alibi_viz", "alibi_viz_app", "assets"} <= set(copied)
    assert numeric_user(dockerfile) != 0
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, flags=re.M)
    cmd = re.search(r"^CMD (\[.*?\])$", dockerfile, flags=re.M | re.S).group(1)
    argv = yaml.safe_load(cmd.replace("\\\n", ""))
    assert argv[:3] == ["python", "-m", "alibi_viz_app.serve"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert options == {"--server.address": "0.0.0.0", "--server.port": "8501",
                       "--server.headless": "true", "--browser.gatherUsageStats": "false"}


def test_top_level_readme_repeats_the_sizing_table():
    """README.md's lecture-hall table says what deploy/README.md's does (memory in GiB)."""
    _, class_rows = sizing()
    section = (ROOT / "README.md").read_text().split("## A lecture hall", 1)[1]
    rows = {int(m[0]): m[1:] for m in re.findall(
        r"^\| (\d+) \| (\d+) \| (\d+) cores \| ([\d.]+) GiB \|$", section, flags=re.M)}
    assert sorted(rows) == list(STUDENT_ROWS)
    for students, (replicas, cpu, memory, _limits) in class_rows.items():
        assert rows[students] == (str(int(replicas)), str(int(cpu)), f"{memory / 1024:.1f}")
