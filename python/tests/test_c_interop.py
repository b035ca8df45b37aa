"""The Python front against ferry's C API: the C examples (examples/c/pub.c and sub.c, compiled
here with the system's C compiler against libferry_c) talk to Python over shared memory and over
UDP, every byte checked on the receiving side."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import ferry
from conftest import REPO, child_env, finish, start, wait_subscribed

TRANSPORTS = ["shm", "udp"]


def c_payload(seq: int, size: int) -> np.ndarray:
    """The pattern of examples/c/pub.c and sub.c (and `ferry pub`): the sequence number (u64,
    little endian) first when it fits, then its low byte in every other byte."""
    data = np.full(size, seq & 0xFF, dtype=np.uint8)
    if size >= 8:
        data[:8] = np.frombuffer(np.uint64(seq).tobytes(), np.uint8)
    return data


@pytest.fixture(scope="session")
def c_examples(tmp_path_factory) -> dict:
    """pub and sub from examples/c, built against target/debug/libferry_c.so. With cargo at hand
    the library is brought up to date first (bounded; a no-op when it is): one left from an older
    checkout would speak an older shared-memory layout than the extension under test."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler (cc): install gcc (CI does)"
    lib_dir = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target")) / "debug"
    if shutil.which("cargo"):
        subprocess.run(
            ["cargo", "build", "--locked", "-p", "ferry-c"], cwd=REPO, check=True, timeout=900
        )
    else:
        assert (lib_dir / "libferry_c.so").is_file(), "no libferry_c.so and no cargo to build it"
    assert (lib_dir / "libferry_c.so").is_file(), f"cargo built no {lib_dir}/libferry_c.so"
    out = tmp_path_factory.mktemp("c-examples")
    built = {}
    for name in ["pub", "sub"]:
        exe = out / name
        subprocess.run(
            [cc, "-std=c11", "-O2", "-Wall", "-Werror", f"-I{REPO}/crates/ferry-c/include",
             str(REPO / "examples" / "c" / f"{name}.c"), f"-L{lib_dir}", "-lferry_c",
             f"-Wl,-rpath,{lib_dir}", "-o", str(exe)],
            check=True, timeout=120,
        )
        built[name] = exe
    return built


def env_for(domain: str) -> dict:
    env = child_env()
    env["FERRY_DOMAIN"] = domain
    return env


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_c_publisher_feeds_a_python_subscriber(c_examples, domain, transport):
    size, count = 3000, 20
    qos = ferry.Qos(transport=transport, wait="block", max_message_size=size)
    sub = ferry.Node("py-test", domain=domain).subscriber("topic", qos)
    pub = start(
        [str(c_examples["pub"]), "topic", transport, str(size), str(count)],
        env=env_for(domain),
    )
    try:
        for seq in range(count):
            with sub.recv(timeout=20) as sample:
                assert sample.seq == seq
                got = np.frombuffer(sample, dtype=np.uint8)
                same = np.array_equal(got, c_payload(seq, size))
                # The view reads the ring in place: it goes before the sample is handed back.
                del got
                assert same, f"message {seq} differs"
    finally:
        finish(pub)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_python_publisher_feeds_a_c_subscriber(c_examples, domain, transport):
    size, count = 5000, 20
    c_sub = start(
        [str(c_examples["sub"]), "topic", transport, str(count), "20"],
        env=env_for(domain),
    )
    try:
        qos = ferry.Qos(transport=transport, max_message_size=size)
        pub = ferry.Node("py-test", domain=domain).publisher("topic", qos)
        wait_subscribed(pub, c_sub, "the C subscriber")
        for seq in range(count):
            pub.send(c_payload(seq, size))
    finally:
        out = finish(c_sub)
    assert f"received {count} messages" in out and "every byte as expected" in out, out
