"""A real bundle (samples/h200-checkpoint-stall.tgz) seeded with known identifiers in
every file, for the redaction tests."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "h200-checkpoint-stall.tgz"

HOST = "dgx-a17"
FQDN = "dgx-a17.ml.example-corp.com"
NFS_HOST = "nfs-store3"
IPS = ["10.20.30.40", "192.168.77.5"]
IP6 = ["fd12:3456:789a::17", "2001:db8:abcd:12::5"]
MACS = ["3c:fd:fe:a1:b2:c3", "3C-FD-FE-A1-B2-C4"]
USERS = ["mvasquez", "bobby_t"]
REAL_NAME = "Maria Vasquez"
PATTERN = r"proj-falcon-\d+"
PATTERN_VALUE = "proj-falcon-42"
# every original value that must not survive redaction
ORIGINALS = [HOST, FQDN, NFS_HOST, *IPS, *IP6, *MACS, *USERS, REAL_NAME, PATTERN_VALUE]
# identifiers needed for diagnosis that must stay
KEPT = ["00000000:00:06.0", "GPU-51cb1330-e3cd-8754-4de9-1759daa5809f", "vda", "nvme0n1"]

SEED_LINE = (
    f"seed {HOST} {FQDN} {IPS[0]} {IP6[0]} {MACS[0]} {USERS[0]} /home/{USERS[1]}/run "
    f"{PATTERN_VALUE}\n"
)
OLD_NAME = "hindsight-vm-20261129T184504Z"
NAME = f"hindsight-{HOST}-20261129T184504Z"


def seeded_bundle(dest: Path) -> Path:
    """Extract the sample into ``dest`` as a directory bundle with identifiers seeded."""
    with tarfile.open(SAMPLE) as tf:
        tf.extractall(dest, filter="data")
    bdir = dest / NAME
    (dest / OLD_NAME).rename(bdir)
    for path in sorted(p for p in bdir.rglob("*") if p.is_file()):
        rel = path.relative_to(bdir).as_posix()
        data = path.read_bytes()
        data = data.replace(b"(vm)", f"({HOST})".encode()).replace(
            b"Linux vm ", f"Linux {HOST} ".encode()
        )
        if rel == "manifest.json":
            doc = json.loads(data)
            doc["host"]["hostname"] = HOST
            doc["args"] += ["--note", f"{FQDN} {IPS[1]} {IP6[1]} {MACS[1]} {PATTERN_VALUE}"]
            data = json.dumps(doc, indent=2).encode()
        elif rel == "series/iostat_json.out":
            data = data.replace(b'"nodename": "vm"', f'"nodename": "{FQDN}"'.encode())
            data = data.replace(
                b'"release": "6.18.44-fc-v657-gpu"',
                f'"release": "6.18.44-fc-v657-gpu {USERS[0]} {IPS[0]} {MACS[0]} {PATTERN_VALUE}"'.encode(),
            )
        else:
            if data and not data.endswith(b"\n"):
                data += b"\n"
            data += SEED_LINE.encode()
        path.write_bytes(data)
    snap = bdir / "snap"
    with open(snap / "ps_cpu.start.out", "a") as f:
        f.write(
            f" 4242     1 {USERS[0]:<8}  19   0   3 S     0.0  0.0   100    200    1      10 python "
            f"python /home/{USERS[0]}/train.py --master_addr {IPS[1]} --master {NFS_HOST}\n"
        )
    with open(snap / "pids.start.out", "a") as f:
        f.write(
            f"1 environ USER={USERS[1]}\n1 environ HOSTNAME={HOST}\n1 environ SSH_CONNECTION={IPS[1]} 5022\n"
        )
    with open(snap / "mounts.start.out", "a") as f:
        f.write(
            f"{NFS_HOST}:/export/ckpt /mnt/ckpt nfs4 rw,relatime,addr={IPS[0]},clientaddr={IPS[1]} 0 0\n"
        )
    with open(snap / "dmesg_full.start.out", "a") as f:
        f.write(
            f"2026-11-29T18:44:00,000000+00:00 mlx5_core 0000:3b:00.0 eth0: Link up, MAC {MACS[1]}, "
            f"addr {IP6[1]} nvme0n1 ok\n"
        )
    (snap / "passwd.start.out").write_text(
        f"root:x:0:0:root:/root:/bin/bash\n{USERS[0]}:x:1001:1001:{REAL_NAME},,,:/home/{USERS[0]}:/bin/bash\n"
    )
    return bdir
