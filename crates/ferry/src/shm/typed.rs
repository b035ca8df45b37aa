//! A topic's type in its control segment (`layout::TypeBlock`): given by the first end that
//! declares one, checked against every later one, read by tools. Written once, never per message.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::layout::{load_bytes, load_str, store_bytes, store_str, TypeBlock};
use super::topic::Topic;
use crate::topic_type::{type_hash, MessageEncoding, TopicType, MAX_SCHEMA};
use crate::Error;

/// How long an end waits for another process that is writing the topic's type.
const WRITE_WAIT: Duration = Duration::from_secs(2);
/// A writer that has not finished after this long and whose process is gone left the type
/// half-written: it is written again.
const STALE_WRITER: Duration = Duration::from_millis(500);

impl Topic {
    /// Gives the topic the type `declared` if it has none yet, or checks that the one it has is
    /// `declared`: another is refused with [`Error::TypeMismatch`] naming both. `role` names the
    /// end in that error ("publisher", "subscriber").
    pub fn declare_type(&self, declared: &TopicType, role: &'static str) -> Result<(), Error> {
        let block = &self.block().topic_type;
        let start = Instant::now();
        loop {
            if let Some(found) = self.topic_type()? {
                if found == *declared {
                    return Ok(());
                }
                return Err(Error::TypeMismatch {
                    topic: self.topic.clone(),
                    role,
                    found: found.to_string(),
                    declared: declared.to_string(),
                });
            }
            let writer = block.writer.load(Ordering::Relaxed);
            let waited = start.elapsed();
            if writer == 0 || (waited >= STALE_WRITER && !writer_runs(writer)) {
                let mine = self.new_token();
                // Acquire pairs with nothing written before (a stale writer's bytes are all
                // overwritten); the claim only keeps two writers apart.
                if block
                    .writer
                    .compare_exchange(writer, mine, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    store_type(block, declared);
                    return Ok(());
                }
                continue;
            }
            if waited >= WRITE_WAIT {
                return Err(Error::Busy {
                    segment: self.name().to_owned(),
                    pid: (writer & 0xFFFF_FFFF) as u32,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The topic's type, if an end declared one. A type record that does not hold together (a
    /// length out of bounds, an unknown encoding, a name ferry would refuse, a hash that is not
    /// the hash of what is stored) is refused as damaged.
    pub fn topic_type(&self) -> Result<Option<TopicType>, Error> {
        let block = &self.block().topic_type;
        // Acquire pairs with the Release store in `store_type`.
        if block.ready.load(Ordering::Acquire) == 0 {
            return Ok(None);
        }
        let damaged = |detail: String| Error::Layout {
            segment: self.name().to_owned(),
            detail: format!("its topic type record is damaged: {detail}"),
        };
        let code = block.encoding.load(Ordering::Relaxed);
        let encoding = MessageEncoding::from_code(code)
            .ok_or_else(|| damaged(format!("unknown encoding {code}")))?;
        let len = block.schema_len.load(Ordering::Relaxed);
        if len > MAX_SCHEMA as u64 {
            return Err(damaged(format!("a schema of {len} bytes")));
        }
        let schema = load_bytes(&block.schema, len as usize);
        let name = load_str(&block.name);
        let stored = block.hash.load(Ordering::Relaxed);
        if stored != type_hash(&name, encoding, &schema) {
            return Err(damaged(format!(
                "hash {stored:016x} is not the hash of its type"
            )));
        }
        TopicType::new(&name, encoding, schema)
            .map(Some)
            .map_err(|e| damaged(e.to_string()))
    }
}

/// Whether the process whose token claimed the type record still runs (judged by the pid in
/// the token's low 32 bits, as a half-claimed slot is).
fn writer_runs(token: u64) -> bool {
    let pid = (token & 0xFFFF_FFFF) as u32;
    pid != 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}

fn store_type(block: &TypeBlock, t: &TopicType) {
    store_str(&block.name, t.name());
    block.encoding.store(t.encoding().code(), Ordering::Relaxed);
    block.hash.store(t.hash(), Ordering::Relaxed);
    block
        .schema_len
        .store(t.schema().len() as u64, Ordering::Relaxed);
    // Only the words the schema takes: the rest of the block's pages stay untouched.
    store_bytes(&block.schema, t.schema());
    // Release pairs with the Acquire load in `topic_type`.
    block.ready.store(1, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::topic::Topic;

    fn imu() -> TopicType {
        TopicType::new(
            "sensor_msgs/msg/Imu",
            MessageEncoding::Cdr,
            "float64 x\n".repeat(1000),
        )
        .unwrap()
    }

    #[test]
    fn the_first_declared_type_is_the_topics_and_another_is_refused() {
        let dom = format!("typed-{}", std::process::id());
        let t = Topic::open(&dom, "imu", 0o600).unwrap();
        assert!(t.topic_type().unwrap().is_none());
        t.declare_type(&imu(), "publisher").unwrap();
        assert_eq!(t.topic_type().unwrap(), Some(imu()));
        assert_eq!(t.topic_type().unwrap().unwrap().schema(), imu().schema());
        t.declare_type(&imu(), "subscriber").unwrap();
        let other = TopicType::new("geometry_msgs/msg/Vector3", MessageEncoding::Cdr, "").unwrap();
        let e = t.declare_type(&other, "subscriber").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("sensor_msgs/msg/Imu") && text.contains("geometry_msgs/msg/Vector3"),
            "{text}"
        );
        t.remove_if_unused();
    }

    #[test]
    fn a_forged_type_record_is_refused_as_damaged() {
        let dom = format!("typed-forged-{}", std::process::id());
        let t = Topic::open(&dom, "imu", 0o600).unwrap();
        t.declare_type(&imu(), "publisher").unwrap();
        let block = &t.block().topic_type;
        block.schema_len.store(u64::MAX, Ordering::Relaxed);
        assert!(t.topic_type().unwrap_err().to_string().contains("damaged"));
        block.schema_len.store(8, Ordering::Relaxed);
        let e = t.topic_type().unwrap_err().to_string();
        assert!(e.contains("hash"), "{e}");
        block.encoding.store(99, Ordering::Relaxed);
        assert!(t.topic_type().unwrap_err().to_string().contains("encoding"));
        // An end declaring a type is refused with the same error, never handed the forgery.
        assert!(t.declare_type(&imu(), "subscriber").is_err());
        t.remove_if_unused();
    }

    #[test]
    fn a_writer_that_died_mid_write_is_taken_over() {
        let dom = format!("typed-stale-{}", std::process::id());
        let t = Topic::open(&dom, "imu", 0o600).unwrap();
        // A token naming a pid no process has.
        t.block()
            .topic_type
            .writer
            .store(0x7FFF_FFF0, Ordering::Relaxed);
        t.declare_type(&imu(), "publisher").unwrap();
        assert_eq!(t.topic_type().unwrap(), Some(imu()));
        t.remove_if_unused();
    }
}
