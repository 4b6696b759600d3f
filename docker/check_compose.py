"""Checks docker/compose.yaml without a Docker engine: it parses, reserves the GPU the Compose way
for `workbook`, mounts the checkout, shares the GPU lock volume, serves the book on a port, and
builds docker/Dockerfile with the build arguments that file declares. Run by .ci/run.

    python3 docker/check_compose.py   # needs PyYAML
"""

import re
import sys
from pathlib import Path

import yaml

DOCKER = Path(__file__).resolve().parent
compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
dockerfile = (DOCKER / "Dockerfile").read_text()
services = compose["services"]
problems = []


def expect(condition, message):
    if not condition:
        problems.append(message)


expect(set(services) >= {"workbook", "workbook-cpu", "book"}, f"services: {sorted(services)}")

gpu = services["workbook"].get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
expect(
    any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in gpu),
    f"workbook reserves no NVIDIA GPU (deploy.resources.reservations.devices): {gpu}",
)
for name in ("workbook-cpu", "book"):
    expect("deploy" not in services[name], f"{name} must run without a GPU, but has deploy: {services[name].get('deploy')}")

declared = set(re.findall(r"^ARG (\w+)", dockerfile, re.MULTILINE))
for name, service in services.items():
    build = service.get("build", {})
    expect((DOCKER / build.get("context", ".") / build.get("dockerfile", "")).resolve() == DOCKER / "Dockerfile",
           f"{name} does not build docker/Dockerfile: {build}")
    unknown = set(build.get("args", {})) - declared
    expect(not unknown, f"{name} passes build arguments the Dockerfile does not declare: {sorted(unknown)}")
    mounts = {(v["source"], v["target"]) for v in service.get("volumes", [])}
    expect(("..", "/workbook") in mounts, f"{name} does not mount the checkout at /workbook: {mounts}")
    expect(("grader-gpu-locks", "/var/lib/grader-gpu-locks") in mounts, f"{name} does not share the GPU locks")

expect("CUDA_VERSION" in declared and "CUDARC_CUDA_VERSION" in declared, f"Dockerfile ARGs: {sorted(declared)}")
expect("GRADER_LOCK_DIR=/var/lib/grader-gpu-locks" in dockerfile, "the image does not point GRADER_LOCK_DIR at the volume")
expect(compose["volumes"]["grader-gpu-locks"].get("name") == "grader-gpu-locks",
       "the lock volume needs a fixed name, to be one volume for every learner's project on a host")
expect("3000:3000" in services["book"].get("ports", []), f"book ports: {services['book'].get('ports')}")
expect("serve" in services["book"].get("command", []), f"book command: {services['book'].get('command')}")

if problems:
    sys.exit("docker/compose.yaml:\n  " + "\n  ".join(problems))
print(f"docker/compose.yaml parses: {len(services)} services, `workbook` reserves an NVIDIA GPU, the book on port 3000")
