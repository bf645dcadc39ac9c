#!/usr/bin/python3
"""Tour step `backup`: the registry and the checkpoints go to Azure Blob
storage (Azurite, Microsoft's emulator, on a loopback port), are deleted, come
back with `gantry backup restore`, and `gantry registry verify` passes on
every restored byte.
"""

import hashlib
import os
import shutil
import socket

import common

REPO_ROOT = os.path.dirname(os.path.dirname(common.HERE))
# Azurite's well-known development account (public, documented by Microsoft).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def tree_digest(root):
    """SHA-256 over every file's relative path and bytes: equal trees, equal digests."""
    h = hashlib.sha256()
    for base, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(base, name)
            h.update(os.path.relpath(p, root).encode() + b"\0")
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def main(step):
    g = common.gantry()
    d = common.out_dir("backup")
    registry = common.out_dir("registry")
    ckpt = os.path.join(common.out_dir("train"), "ckpt")
    azurite_bin = os.path.join(REPO_ROOT, "node_modules", ".bin", "azurite-blob")
    if not os.path.exists(azurite_bin):
        raise RuntimeError(f"{azurite_bin} is missing: run `make deps` (npm ci installs Azurite)")
    location = os.path.join(d, "azurite")
    shutil.rmtree(location, ignore_errors=True)
    port = common.free_port()
    endpoint = f"http://127.0.0.1:{port}/{ACCOUNT}"
    env = {"AZURE_STORAGE_CONNECTION_STRING":
           f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
           f"BlobEndpoint={endpoint};",
           "GANTRY_REGISTRY_DB": os.path.join(registry, "registry.db")}
    repo = f"az://{ACCOUNT}/tour-backups"
    azurite = common.Service("azurite", [azurite_bin, "--blobHost", "127.0.0.1", "--blobPort",
                                         port, "--location", location, "--silent",
                                         "--skipApiVersionCheck", "--loose", "--disableTelemetry"])
    try:
        common.wait_until(lambda: _listening(port), timeout=30, what="azurite")
        before = {"registry": tree_digest(registry), "ckpt": tree_digest(ckpt)}
        made = common.run_json([g, "backup", "create", "--repo", repo, "--tag", "tour=1",
                                registry, ckpt, "--json"], env=env, timeout=300)
        st = made["stats"]
        step.say(f"backup {made['id']} to {repo}: {st['files']} files, {st['bytes']} bytes in "
                 f"{st['chunks']} chunks, {st['uploaded_bytes']} bytes uploaded (zstd)")
        v = common.run([g, "backup", "verify", "--repo", repo, "latest", "--read-data"], env=env,
                       check=False)
        step.check(v.returncode == 0, "gantry backup verify --read-data passes", f"exit {v.returncode}")

        shutil.rmtree(registry)
        shutil.rmtree(ckpt)
        step.say("deleted the registry (database, artifacts, audit log) and the checkpoints")
        gone = common.run([g, "registry", "verify", "churn@production"], env=env, check=False)
        step.check(gone.returncode == 2, "with the registry gone, verify fails naming what is missing",
                   (gone.stderr or gone.stdout).strip()[-160:])

        restore_to = common.out_dir("backup", "restore")
        shutil.rmtree(restore_to)
        common.run([g, "backup", "restore", "--repo", repo, "latest", "--to", restore_to],
                   env=env, timeout=300)
        shutil.move(os.path.join(restore_to, "registry"), registry)
        shutil.move(os.path.join(restore_to, "ckpt"), ckpt)
        after = {"registry": tree_digest(registry), "ckpt": tree_digest(ckpt)}
        step.check(after == before, "the restored trees are byte for byte the originals",
                   f"registry {after['registry'][:12]}, checkpoints {after['ckpt'][:12]}")
        ok = common.run([g, "registry", "verify", "churn@production"], env=env, check=False)
        step.check(ok.returncode == 0, "gantry registry verify churn@production passes after restore",
                   ok.stdout.strip().splitlines()[-1] if ok.stdout.strip() else ok.stderr.strip())
        cv = common.run([g, "ckpt", "verify", os.path.join(ckpt, "churn")], check=False)
        step.check(cv.returncode == 0, "gantry ckpt verify passes on the restored checkpoints",
                   f"exit {cv.returncode}")
    finally:
        azurite.stop()


def _listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    common.Step("backup", 7, "Back up to Azure Blob (Azurite), delete, restore, verify").run(main)
