//! Plain-old-data element types that can be sent and viewed as byte payloads without copying.

/// A type whose every bit pattern is valid and that has no padding, pointers or drop glue, so a
/// slice of it can be viewed as bytes and rebuilt from bytes.
///
/// # Safety
/// Implement only for types that are `Copy`, `#[repr(C)]` or primitive, have no padding bytes,
/// and for which every bit pattern is a valid value.
pub unsafe trait Pod: Copy + 'static {}

macro_rules! impl_pod {
    ($($t:ty),*) => { $(
        // SAFETY: primitive numbers have no padding and accept every bit pattern.
        unsafe impl Pod for $t {}
    )* };
}
impl_pod!(u8, u16, u32, u64, u128, i8, i16, i32, i64, i128, f32, f64);
// SAFETY: an array of Pod has no padding between elements and accepts every bit pattern.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// Views a slice of `T` as its bytes.
pub fn as_bytes<T: Pod>(items: &[T]) -> &[u8] {
    // SAFETY: T is Pod (no padding, any bytes valid); the byte length is exact.
    unsafe { std::slice::from_raw_parts(items.as_ptr().cast(), std::mem::size_of_val(items)) }
}

/// How many `T` the bytes hold, once their length and alignment are checked; `None` for no bytes
/// (no elements, wherever they point: an empty buffer's pointer is dangling, so its alignment
/// says nothing and a caller must not build a slice on it).
fn element_count<T: Pod>(bytes: &[u8]) -> Result<Option<usize>, crate::PodError> {
    let size = std::mem::size_of::<T>();
    if size == 0 || bytes.len() % size != 0 {
        return Err(crate::PodError::Length {
            len: bytes.len(),
            size,
        });
    }
    if bytes.is_empty() {
        return Ok(None);
    }
    if bytes.as_ptr() as usize % std::mem::align_of::<T>() != 0 {
        return Err(crate::PodError::Alignment {
            align: std::mem::align_of::<T>(),
        });
    }
    Ok(Some(bytes.len() / size))
}

/// Views bytes as a slice of `T`, checking length and alignment.
pub fn from_bytes<T: Pod>(bytes: &[u8]) -> Result<&[T], crate::PodError> {
    let Some(n) = element_count::<T>(bytes)? else {
        return Ok(&[]);
    };
    // SAFETY: `element_count` checked length and alignment; every bit pattern is a valid T.
    Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), n) })
}

/// Views bytes mutably as a slice of `T`, checking length and alignment.
pub fn from_bytes_mut<T: Pod>(bytes: &mut [u8]) -> Result<&mut [T], crate::PodError> {
    let Some(n) = element_count::<T>(bytes)? else {
        return Ok(&mut []);
    };
    // SAFETY: `element_count` checked length and alignment; every bit pattern is a valid T; the
    // borrow is exclusive.
    Ok(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast(), n) })
}
