"""Credentials for an authenticated NATS: one user per service, allowed to publish only the
subjects its work needs (``longhaul.domain.permissions``), plus an ``admin`` user for operators.

``longhaul up`` generates them into the data dir (mode 0600) and starts its embedded server with
the matching ``authorization`` block; ``longhaul nats-auth`` writes the same for docker compose
or any other deployment. Passwords are random per installation and only ever travel in a
service's own environment (tools never inherit it: their environment is an allow-list).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from longhaul.domain.names import Names
from longhaul.domain.permissions import ADMIN_USER, IMPORTER, SERVICES, publish_allow

Credentials = dict[str, str]  # user -> password

CREDENTIALS_FILE = "nats-credentials.json"


def generate() -> Credentials:
    return {user: secrets.token_urlsafe(24) for user in (*SERVICES, ADMIN_USER)}


def load_or_create(directory: Path) -> tuple[Credentials, Path]:
    """The credentials kept in ``directory`` (created on first use, owner-only), so a restarted
    stack keeps the passwords its running clients were given."""
    path = directory / CREDENTIALS_FILE
    stored = json.loads(path.read_text()) if path.exists() else {}
    kept = {str(k): str(v) for k, v in stored.items()} if isinstance(stored, dict) else {}
    credentials = {**generate(), **kept}  # a user added since gets a password of its own
    if credentials != kept:
        write_private(path, json.dumps(credentials, indent=2))
    return credentials, path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)


def authorization_block(credentials: Credentials, names: Names) -> str:
    """The nats-server ``authorization`` block (its config syntax accepts JSON values)."""
    users: list[dict[str, object]] = [
        {
            "user": service,
            "password": credentials[service],
            "permissions": {
                "publish": {"allow": publish_allow(names, service)},
                "subscribe": {"allow": [">"]},
            },
        }
        for service in SERVICES
    ]
    users.append({"user": ADMIN_USER, "password": credentials[ADMIN_USER]})
    return "authorization: " + json.dumps({"users": users}, indent=2) + "\n"


def service_env(credentials: Credentials, user: str) -> dict[str, str]:
    """The environment that makes a longhaul process connect as ``user`` (an executor also
    gets the import writer's user, for its second connection)."""
    env = {"LONGHAUL_NATS__USER": user, "LONGHAUL_NATS__PASSWORD": credentials[user]}
    if user == "executor":
        env["LONGHAUL_EXECUTOR__IMPORT_USER"] = IMPORTER
        env["LONGHAUL_EXECUTOR__IMPORT_PASSWORD"] = credentials[IMPORTER]
    return env


def write_deployment(directory: Path, names: Names) -> list[Path]:
    """Credentials, the server's authorization file and one env file per service, for a
    deployment that runs nats-server itself (docker compose, Kubernetes). All owner-only."""
    credentials, credentials_path = load_or_create(directory)
    written = [credentials_path]
    conf = directory / "nats-auth.conf"
    write_private(conf, authorization_block(credentials, names))
    written.append(conf)
    for service in SERVICES:
        if service == IMPORTER:  # no process of its own: its user is in executor.env
            continue
        env_file = directory / f"{service}.env"
        env = service_env(credentials, service)
        write_private(env_file, "".join(f"{key}={value}\n" for key, value in env.items()))
        written.append(env_file)
    return written
