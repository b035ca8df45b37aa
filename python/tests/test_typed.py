"""Typed topics from Python: a publisher declares a type (ferry.TopicType) and sends dicts, a
subscriber receives them decoded by field (recv_message) beside the raw bytes (recv_bytes); an
end of another type is refused naming both; a message that does not fit its type is refused
naming the field. ROS 2 CDR and protobuf, over shared memory and UDP."""

import subprocess
import time
from pathlib import Path

import pytest

import ferry
from conftest import child_env, meet

DATA = Path(__file__).resolve().parents[2] / "crates" / "ferry-types" / "tests" / "data"
IMU = ferry.TopicType("sensor_msgs/msg/Imu", "cdr", (DATA / "Imu.msg").read_text())
READING = ferry.TopicType("ferry.test.Reading", "protobuf", (DATA / "reading.pb").read_bytes())


@pytest.mark.parametrize("transport", ["shm", "udp"])
def test_dicts_go_out_and_come_back_by_field(domain, transport):
    node = ferry.Node("py-typed", domain=domain)
    pub = node.publisher("imu", ferry.Qos(transport=transport, topic_type=IMU))
    typed = node.subscriber("imu", ferry.Qos(transport=transport, topic_type=IMU))
    untyped = node.subscriber("imu", ferry.Qos(transport=transport))
    meet(typed, pub)
    meet(untyped, pub)
    assert untyped.topic_type == IMU
    pub.send_message({
        "header": {"stamp": {"sec": 12, "nanosec": 34}, "frame_id": "imu_link"},
        "orientation": {"w": 1.0},
        "angular_velocity": {"y": -1.25},
        "linear_acceleration_covariance": list(range(1, 10)),
    })
    got = typed.recv_message(timeout=10)
    assert list(got)[:3] == ["header", "orientation", "orientation_covariance"]
    assert got["header"] == {"stamp": {"sec": 12, "nanosec": 34}, "frame_id": "imu_link"}
    assert got["orientation"] == {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}
    assert got["angular_velocity"]["y"] == -1.25
    assert got["linear_acceleration_covariance"] == [float(i) for i in range(1, 10)]
    # The zero-copy path sees the bytes: CDR, little endian, 324 of them.
    raw = untyped.recv_bytes(timeout=10)
    assert raw[:4] == b"\x00\x01\x00\x00" and len(raw) == 324


def test_protobuf_dicts_come_back_by_field(domain):
    node = ferry.Node("py-typed", domain=domain)
    pub = node.publisher("reading", ferry.Qos(transport="shm", topic_type=READING))
    sub = node.subscriber("reading", ferry.Qos(transport="shm"))
    meet(sub, pub)
    pub.send_message({"frame_id": "imu", "stamp_ns": 7, "values": [0.5], "kind": "KIND_FAST",
                      "tags": {"a": 1}})
    got = sub.recv_message(timeout=10)
    assert got["frame_id"] == "imu" and got["stamp_ns"] == 7 and got["values"] == [0.5]
    assert got["kind"] == "KIND_FAST" and got["tags"] == {"a": 1} and got["inner"] is None


def test_another_type_is_refused_naming_both(domain):
    node = ferry.Node("py-typed", domain=domain)
    pub = node.publisher("imu", ferry.Qos(transport="shm", topic_type=IMU))
    vector3 = ferry.TopicType("geometry_msgs/msg/Vector3", "cdr", "float64 x\nfloat64 y\n")
    with pytest.raises(ferry.FerryError, match="sensor_msgs/msg/Imu.*geometry_msgs/msg/Vector3"):
        node.subscriber("imu", ferry.Qos(transport="shm", topic_type=vector3))
    del pub


def test_what_does_not_fit_is_refused_by_field(domain):
    node = ferry.Node("py-typed", domain=domain)
    pub = node.publisher("imu", ferry.Qos(transport="shm", topic_type=IMU))
    with pytest.raises(ValueError, match=r"header\.stamp\.sec"):
        pub.send_message({"header": {"stamp": {"sec": "soon"}}})
    with pytest.raises(ValueError, match="no field"):
        pub.send_message({"nope": 1})
    untyped = node.publisher("raw", ferry.Qos(transport="shm"))
    with pytest.raises(ferry.FerryError, match="declares no type"):
        untyped.send_message({})
    sub = node.subscriber("raw", ferry.Qos(transport="shm"))
    with pytest.raises(ferry.FerryError, match="has no type"):
        sub.recv_message(timeout=0.1)


def test_bad_schemas_are_refused_when_the_type_is_made():
    with pytest.raises(ValueError, match="does not define"):
        ferry.TopicType("a/B", "cdr", "Missing m\n")
    with pytest.raises(ValueError, match="FileDescriptorSet"):
        ferry.TopicType("a.B", "protobuf", b"\xff\xff")
    with pytest.raises(ValueError, match="more than"):
        ferry.TopicType("a/B", "raw", b"x" * (64 * 1024 + 1))
    with pytest.raises(ValueError, match="cbor"):
        ferry.TopicType("a/B", "cbor", "")


def test_ferry_echo_decodes_what_python_sends(ferry_bin, domain):
    node = ferry.Node("py-typed", domain=domain)
    pub = node.publisher("imu", ferry.Qos(transport="shm", topic_type=IMU))
    echo = subprocess.Popen(
        [str(ferry_bin), "echo", "imu", "--json", "--count", "1", "--timeout", "20",
         "--domain", domain],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
    )
    try:
        deadline = time.monotonic() + 20
        while pub.subscriber_count == 0:
            assert time.monotonic() < deadline, "echo did not subscribe"
            time.sleep(0.01)
        pub.send_message({"header": {"frame_id": "from-python"}})
        out, err = echo.communicate(timeout=30)
    finally:
        echo.kill()
    assert echo.returncode == 0, err
    assert '"frame_id":"from-python"' in out, out
