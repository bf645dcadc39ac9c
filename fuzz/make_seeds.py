#!/usr/bin/python3
"""Writes the seed corpora fuzz/corpus/<target>/ from the tests' fixtures.

Each target's seeds are the string literals of the unit tests of the code it
fuzzes (adjacent literals joined, as the compiler joins them) plus a few
fixture files, deduplicated, at most MAX_SEEDS per target and MAX_BYTES each.
Targets whose first input byte selects a mode get each seed once per mode.
Seeds are named by the SHA-1 of their content, as libFuzzer names the inputs
it adds, so rerunning this script rewrites the same files (and leaves other
files, such as inputs merged in from fuzzing runs, alone):

    /usr/bin/python3 fuzz/make_seeds.py          # from the repository root

The corpus is kept in git; `make fuzz` runs each target on a temporary copy
of it, so new inputs found in CI never land in the working tree. To keep
interesting inputs from a longer local run, merge them in:
    build/fuzz/bin/fuzz_x -merge=1 fuzz/corpus/fuzz_x /tmp/new-inputs
"""

import hashlib
import os
import re
import sys

MAX_SEEDS = 60
MAX_BYTES = 8192
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# target -> (test sources whose literals seed it, fixture files/folders, mode prefixes)
# A prefix of b"" means the target reads the input as it is; several prefixes
# give each seed once per mode byte.
TARGETS = {
    "fuzz_units": (["src/core/units_test.cc"], [], [b""]),
    "fuzz_config": (["src/core/config_test.cc", "src/core/config_views_test.cc"],
                    ["examples/agent/rules.yaml", "examples/drift/schema.yaml",
                     "examples/autoscale/slurm-partition.yaml"], [b""]),
    "fuzz_ckpt_format": (["src/ckpt/format_test.cc"], [], [b"\x00", b"\x01"]),
    "fuzz_http_parser": (["src/core/http_parser_test.cc"], [], [b""]),
    "fuzz_gateway_sniff": (["src/gateway/sniff_test.cc"], [], [b""]),
    "fuzz_security_jwt": (["src/security/jwt_test.cc", "src/security/api_key_test.cc",
                           "src/security/audit_test.cc", "src/security/json_check_test.cc"], [],
                          [b"\x00", b"\x01", b"\x02", b"\x03", b"\x04"]),
    "fuzz_advise": (["src/advise/advise_test.cc", "src/advise/catalog_test.cc"],
                    ["examples/advise/finetune-8b.yaml", "examples/advise/serve-70b.yaml"],
                    [b"\x00", b"\x01", b"\x02"]),
    "fuzz_health_profile": (["src/health/profile_test.cc"],
                            ["data/health/generic.yaml", "data/health/nd96isr_h100_v5.yaml"], [b""]),
    "fuzz_drift_readers": (["src/drift/table_test.cc", "src/drift/schema_test.cc"],
                           ["examples/drift/schema.yaml"], [b"\x00", b"\x01", b"\x02", b"\x03"]),
    "fuzz_storage_parsers": (["src/storage/object_store_test.cc"],
                             [], [b""]),
    "fuzz_scheduled_events": (["src/core/scheduled_events_test.cc"], [], [b""]),
    "fuzz_agent_config": (["src/agent/rules_test.cc", "src/alerting/notify_test.cc",
                           "src/agent/idle_test.cc"], ["examples/agent/rules.yaml"], [b""]),
    "fuzz_backup_manifest": (["src/backup/manifest_test.cc"], [], [b""]),
    "fuzz_registry_statement": (["src/registry/registry_test.cc", "src/security/dsse_test.cc"], [], [b""]),
    "fuzz_gateway_anomaly": (["src/gateway/anomaly_test.cc"], [], [b"\x00", b"\x01"]),
    "fuzz_assess_arm": ([], ["src/assess/testdata/arm", "src/assess/testdata/engine/workspace.json",
                             "src/assess/testdata/engine/malformed.json"], [b""]),
    "fuzz_jobs_workflow": (["src/jobs/workflow_test.cc"], ["examples/jobs/workflow.yaml"], [b""]),
    "fuzz_autoscale_hostlist": (["src/autoscale/hostlist_test.cc"], [], [b""]),
    # New in issue 24.
    "fuzz_imds": (["src/core/imds_test.cc"], [], [b""]),
    "fuzz_health_scontrol": (["src/health/slurm_test.cc"], [], [b""]),
    "fuzz_gateway_config": (["src/gateway/config_test.cc"],
                            ["examples/autoscale/scale-to-zero/gateway.yaml"], [b""]),
    "fuzz_gateway_resp": ([], [], [b"\x00", b"\x03"]),
    "fuzz_gateway_admin": ([], [], [b"\x00", b"\x01"]),
    "fuzz_registry_http": (["src/registry/http_api_test.cc"], [], [b"\x00", b"\x01", b"\x02", b"\x04"]),
}

# Hand-written seeds where the tests hold no literal of the input's shape.
EXTRA = {
    "fuzz_gateway_resp": [
        b"+OK\r\n", b"-ERR unknown command\r\n", b"-NOSCRIPT No matching script\r\n",
        b":1\r\n", b":-9223372036854775808\r\n", b"$5\r\nhello\r\n", b"$0\r\n\r\n", b"$-1\r\n",
        b"*-1\r\n", b"*0\r\n", b"*2\r\n:1\r\n$3\r\nabc\r\n",
        b"*3\r\n:1\r\n:59\r\n*2\r\n$1\r\nk\r\n:0\r\n", b"*1\r\n*1\r\n*1\r\n:7\r\n",
        b"+PONG\r\n:3\r\n$2\r\nhi\r\n", b"*2147483647\r\n", b"$2147483647\r\n",
    ],
    "fuzz_gateway_admin": [
        b"GET /admin/keys\n", b"POST /admin/keys\n{\"name\": \"ci\", \"role\": \"admin\"}",
        b"POST /admin/keys\n{\"name\": \"ci\", \"role\": \"user\", \"expires_in_s\": 3600}",
        b"GET /admin/keys/{id}\n", b"DELETE /admin/keys/{id}\n",
        b"POST /admin/keys/{id}/rotate\n{\"grace_s\": 60}", b"GET /admin/usage?key={id}\n",
        b"GET /admin/backends\n", b"POST /admin/backends/a1/drain\n",
        b"POST /admin/backends/a1/undrain\n", b"GET /admin/pools\n", b"GET /admin/pools/llm\n",
        b"POST /admin/pools/cold/backends\n{\"name\": \"c1\", \"address\": \"127.0.0.1:9100\"}",
        b"POST /admin/pools/llm/backends\n"
        b"{\"name\": \"b6\", \"address\": \"[::1]:9101\", \"zone\": \"z1\", \"weight\": 3}",
        b"DELETE /admin/pools/llm/backends/a1?force=true\n", b"GET /admin/rollouts\n",
        b"GET /admin/rollouts/canary\n",
        b"PUT /admin/rollouts/canary\n{\"weights\": {\"llm\": 50, \"llm-v2\": 50}}",
        b"POST /admin/rollouts/canary/rollback\n", b"GET /admin/anomalies\n",
    ],
    "fuzz_registry_http": [
        b"GET /api/2.0/mlflow/registered-models/get?name=bert\n",
        b"GET /api/2.0/mlflow/registered-models/search?max_results=10\n",
        b"GET /api/2.0/mlflow/model-versions/get?name=bert&version=1\n",
        b"GET /api/2.0/mlflow/model-versions/search?name=bert&tag=k=v&max_results=5\n",
        b"GET /api/2.0/mlflow/registered-models/alias?name=bert&alias=champion\n",
        b"POST /api/2.0/mlflow/registered-models/create\n{\"name\": \"gpt\", \"description\": \"d\"}",
        b"POST /api/2.0/mlflow/registered-models/update\n{\"name\": \"bert\", \"description\": \"x\"}",
        b"POST /api/2.0/mlflow/model-versions/create\n{\"name\": \"bert\", \"files\": [{\"path\": "
        b"\"w.bin\", \"sha256\": \"" + b"0" * 64 + b"\", \"size\": 7}], \"tags\": {\"k\": \"v\"}}",
        b"POST /api/2.0/mlflow/model-versions/update\n"
        b"{\"name\": \"bert\", \"version\": \"1\", \"description\": \"y\"}",
        b"POST /api/2.0/mlflow/model-versions/set-tag\n"
        b"{\"name\": \"bert\", \"version\": \"1\", \"key\": \"stage\", \"value\": \"prod\"}",
        b"POST /api/2.0/mlflow/registered-models/set-tag\n"
        b"{\"name\": \"bert\", \"key\": \"team\", \"value\": \"nlp\"}",
        b"POST /api/2.0/mlflow/registered-models/alias\n"
        b"{\"name\": \"bert\", \"alias\": \"prod\", \"version\": \"1\", \"expected_version\": 0}",
        b"DELETE /api/2.0/mlflow/registered-models/alias?name=bert&alias=prod&expected_version=1\n",
        b"GET /api/2.0/gantry/signatures?name=bert&version=1\n", b"GET /api/2.0/gantry/policy\n",
        b"POST /api/2.0/gantry/policy\n{\"require_signatures\": false}",
        b"GET /api/2.0/gantry/trusted-keys\n",
        b"DELETE /api/2.0/gantry/trusted-keys?keyid=abc\n",
        b"GET /api/2.0/gantry/manifests/sha256/" + b"0" * 64 + b"\n",
        b"GET /api/2.0/gantry/blobs/sha256/" + b"0" * 64 + b"\n",
        b"DELETE /api/2.0/mlflow/model-versions/delete\n{\"name\": \"gpt\", \"version\": \"1\"}",
        b"DELETE /api/2.0/mlflow/registered-models/delete?name=gpt\n",
        b"POST /api/2.0/gantry/signatures\n{\"name\": \"bert\", \"version\": \"1\", \"bundle\": {}}",
    ],
    "fuzz_health_scontrol": [
        b"NodeName=gpu-001 Arch=x86_64 CoresPerSocket=48 State=IDLE+DRAIN ThreadsPerCore=1 "
        b"Reason=gantry: gpu_ecc: 3 uncorrectable errors [root@2026-01-02T03:04:05]\n",
        b"NodeName=gpu-002 State=MIXED Reason=(null)\n",
        b"NodeName=a State=DOWN+DRAIN+NOT_RESPONDING Reason=Not responding [slurm@2026-01-02T03:04:05]"
        b" Comment=x\nNodeName=b State=IDLE\n",
        b"NodeName=gpu-003\n   State=ALLOCATED ThreadsPerCore=2\n   Reason=maintenance\n",
    ],
    "fuzz_imds": [
        b"{\"compute\": {\"vmSize\": \"Standard_ND96isr_H100_v5\", \"location\": \"eastus\", "
        b"\"priority\": \"Spot\", \"evictionPolicy\": \"Delete\", \"zone\": \"1\"}, \"network\": "
        b"{\"interface\": [{\"ipv4\": {\"ipAddress\": [{\"privateIpAddress\": \"10.0.0.4\", "
        b"\"publicIpAddress\": \"20.1.2.3\"}]}, \"ipv6\": {\"ipAddress\": []}}]}}",
    ],
}

LITERAL = re.compile(
    rb'(?P<raw>R"(?P<delim>[^(\s]*)\((?P<rawbody>.*?)\)(?P=delim)")'
    rb'|(?P<str>"(?:[^"\\\n]|\\.)*")'
    rb"|(?P<chr>'(?:[^'\\\n]|\\.)+')"
    rb"|(?P<comment>//[^\n]*|/\*.*?\*/)"
    rb"|(?P<other>[^\s])",
    re.S)

ESCAPES = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"0": b"\0", b"\\": b"\\", b'"': b'"',
           b"'": b"'", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"v": b"\v", b"?": b"?"}


def unescape(body):
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i:i + 1]
        if c != b"\\":
            out += c
            i += 1
            continue
        e = body[i + 1:i + 2]
        if e == b"x":
            m = re.match(rb"[0-9a-fA-F]+", body[i + 2:])
            out.append(int(m.group(0), 16) & 0xFF)
            i += 2 + len(m.group(0))
        elif e in b"01234567" and e:
            m = re.match(rb"[0-7]{1,3}", body[i + 1:])
            out.append(int(m.group(0), 8) & 0xFF)
            i += 1 + len(m.group(0))
        else:
            out += ESCAPES.get(e, e)
            i += 2
    return bytes(out)


def literals(path):
    """The string literals of a C++ file, adjacent ones joined."""
    text = open(path, "rb").read()
    out, current = [], None
    for m in LITERAL.finditer(text):
        if m.group("comment") is not None:
            continue
        piece = None
        if m.group("raw") is not None:
            piece = m.group("rawbody")
        elif m.group("str") is not None:
            # Skip the prefix of u8"..." etc.: the regex matched from the quote.
            piece = unescape(m.group("str")[1:-1])
        if piece is None:
            if current is not None:
                out.append(current)
            current = None
            continue
        current = piece if current is None else current + piece
    if current is not None:
        out.append(current)
    return out


def fixture_files(rel):
    path = os.path.join(ROOT, rel)
    if os.path.isdir(path):
        for d, _, files in sorted(os.walk(path)):
            for f in sorted(files):
                yield os.path.join(d, f)
    else:
        yield path


def main():
    total = 0
    for target, (tests, fixtures, prefixes) in TARGETS.items():
        seeds = []
        for f in fixtures:
            for p in fixture_files(f):
                seeds.append(open(p, "rb").read())
        seeds += EXTRA.get(target, [])
        for t in tests:
            path = os.path.join(ROOT, t)
            if not os.path.exists(path):
                sys.exit(f"make_seeds: {t} (a seed source of {target}) does not exist")
            # Include paths, test names and one-word labels are not inputs.
            seeds += [s for s in literals(path) if len(s) >= 4 and not s.endswith(b".h")]
        unique, seen = [], set()
        for s in seeds:
            s = s[:MAX_BYTES]
            if s not in seen:
                seen.add(s)
                unique.append(s)
        unique = unique[:MAX_SEEDS]
        if not unique:
            sys.exit(f"make_seeds: no seeds for {target}")
        out = os.path.join(ROOT, "fuzz", "corpus", target)
        os.makedirs(out, exist_ok=True)
        n = 0
        for s in unique:
            for prefix in prefixes:
                data = prefix + s
                name = hashlib.sha1(data).hexdigest()
                with open(os.path.join(out, name), "wb") as fh:
                    fh.write(data)
                n += 1
        total += n
        print(f"{target}: {n} seeds")
    print(f"total: {total}")


if __name__ == "__main__":
    main()
