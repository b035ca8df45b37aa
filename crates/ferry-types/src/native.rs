//! Rust types as typed topics: the bytes of a message and the type to declare for them.
//!
//! - With the `serde-cdr` feature, a serde type that mirrors a ROS 2 message (fields in the
//!   definition's order, `Vec` for `T[]`, arrays for `T[N]`, `String` for `string`) implements
//!   [`Ros2Message`] with its name and definition; [`to_cdr`] and [`from_cdr`] give and take its
//!   bytes (through the `cdr` crate: XCDR1, little endian, with the encapsulation header), which
//!   `ferry echo`, `ferry record` and ROS 2 tools read.
//! - A protobuf message of prost with prost-reflect's `ReflectMessage` gives its descriptor;
//!   [`protobuf_type`] makes the type from it (the descriptor set of its file and imports), and
//!   prost's `encode_to_vec` gives the bytes.

use ferry::{MessageEncoding, TopicType};
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::FileDescriptorSet;
use prost_reflect::MessageDescriptor;

use crate::TypeError;

/// The type of protobuf messages of `message` (`Message::descriptor()` of a prost-reflect
/// message): its full name and the descriptor set of the pool it comes from.
pub fn protobuf_type(message: &MessageDescriptor) -> Result<TopicType, TypeError> {
    let set = FileDescriptorSet {
        file: message
            .parent_pool()
            .file_descriptor_protos()
            .cloned()
            .collect(),
    };
    TopicType::new(
        message.full_name(),
        MessageEncoding::Protobuf,
        set.encode_to_vec(),
    )
    .map_err(|e| TypeError::Schema(e.to_string()))
}

/// A Rust type whose values are a ROS 2 message.
#[cfg(feature = "serde-cdr")]
pub trait Ros2Message: serde::Serialize + serde::de::DeserializeOwned {
    /// The message's name, e.g. `geometry_msgs/msg/Vector3`.
    const NAME: &'static str;
    /// Its definition with its dependencies, as MCAP's `ros2msg` schemas hold it.
    const DEFINITION: &'static str;

    /// The type to declare (`Qos::topic_type`).
    fn topic_type() -> Result<TopicType, TypeError> {
        TopicType::new(Self::NAME, MessageEncoding::Cdr, Self::DEFINITION)
            .map_err(|e| TypeError::Schema(e.to_string()))
    }
}

/// The CDR bytes of `value` (little endian, with the encapsulation header).
#[cfg(feature = "serde-cdr")]
pub fn to_cdr<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, TypeError> {
    cdr::serialize::<_, _, cdr::CdrLe>(value, cdr::Infinite)
        .map_err(|e| TypeError::Encode(e.to_string()))
}

/// A value from its CDR bytes (either endianness). A message is hostile input: it is read no
/// further than its own length.
#[cfg(feature = "serde-cdr")]
pub fn from_cdr<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, TypeError> {
    cdr::deserialize_from(bytes, cdr::Bounded(bytes.len() as u64))
        .map_err(|e| TypeError::Decode(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protobuf_descriptor_makes_a_type_ferry_decodes_by() {
        let pool =
            prost_reflect::DescriptorPool::decode(&include_bytes!("../tests/data/reading.pb")[..])
                .unwrap();
        let reading = pool.get_message_by_name("ferry.test.Reading").unwrap();
        let t = protobuf_type(&reading).unwrap();
        assert_eq!(t.name(), "ferry.test.Reading");
        let codec = crate::Codec::new(&t).unwrap();
        let m = prost_reflect::DynamicMessage::deserialize(
            reading,
            &serde_json::json!({"frame_id": "imu", "x": 2.5}),
        )
        .unwrap();
        let v = codec.decode(&m.encode_to_vec()).unwrap();
        assert!(v
            .to_json()
            .starts_with(r#"{"frame_id":"imu","stamp_ns":0,"x":2.5"#));
    }

    #[cfg(feature = "serde-cdr")]
    mod cdr_types {
        use super::super::*;

        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Time {
            sec: i32,
            nanosec: u32,
        }

        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Header {
            stamp: Time,
            frame_id: String,
        }

        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Vector3 {
            x: f64,
            y: f64,
            z: f64,
        }

        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Quaternion {
            x: f64,
            y: f64,
            z: f64,
            w: f64,
        }

        #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        struct Imu {
            header: Header,
            orientation: Quaternion,
            orientation_covariance: [f64; 9],
            angular_velocity: Vector3,
            angular_velocity_covariance: [f64; 9],
            linear_acceleration: Vector3,
            linear_acceleration_covariance: [f64; 9],
        }

        impl Ros2Message for Imu {
            const NAME: &'static str = "sensor_msgs/msg/Imu";
            const DEFINITION: &'static str = include_str!("../tests/data/Imu.msg");
        }

        fn imu() -> Imu {
            Imu {
                header: Header {
                    stamp: Time {
                        sec: 12,
                        nanosec: 34,
                    },
                    frame_id: "imu_link".into(),
                },
                orientation: Quaternion {
                    x: 0.0,
                    y: 0.0,
                    z: 0.0,
                    w: 1.0,
                },
                orientation_covariance: [0.0; 9],
                angular_velocity: Vector3 {
                    x: 0.5,
                    y: -1.25,
                    z: 2.0,
                },
                angular_velocity_covariance: [0.0; 9],
                linear_acceleration: Vector3 {
                    x: 0.0,
                    y: 0.0,
                    z: 9.81,
                },
                linear_acceleration_covariance: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
            }
        }

        #[test]
        fn a_serde_type_gives_the_bytes_ferry_and_ros2_tools_decode() {
            let bytes = to_cdr(&imu()).unwrap();
            let codec = crate::Codec::new(&Imu::topic_type().unwrap()).unwrap();
            // The same bytes as ferry's own encoder makes from the same fields as text.
            let text = serde_json::json!({
                "header": {"stamp": {"sec": 12, "nanosec": 34}, "frame_id": "imu_link"},
                "orientation": {"w": 1.0},
                "angular_velocity": {"x": 0.5, "y": -1.25, "z": 2.0},
                "linear_acceleration": {"z": 9.81},
                "linear_acceleration_covariance": [1, 2, 3, 4, 5, 6, 7, 8, 9]
            });
            assert_eq!(bytes, codec.encode(&text).unwrap());
            let v = codec.decode(&bytes).unwrap().to_json();
            assert!(v.contains(r#""frame_id":"imu_link""#), "{v}");
            assert_eq!(from_cdr::<Imu>(&bytes).unwrap(), imu());
        }

        #[test]
        fn lying_cdr_is_refused() {
            // A string that claims 4 GiB.
            let bytes = [0, 1, 0, 0, 12, 0, 0, 0, 34, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
            assert!(from_cdr::<Imu>(&bytes).is_err());
            assert!(from_cdr::<Imu>(&[0, 1]).is_err());
        }
    }
}
