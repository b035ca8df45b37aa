//! include/ferry.h is what cbindgen generates from this crate now: a change to the C API that
//! was not carried into the checked-in header fails here. `FERRY_BLESS=1` rewrites the header.

use std::path::Path;

#[test]
fn the_checked_in_header_is_what_cbindgen_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_src(dir.join("src/lib.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");

    let path = dir.join("include/ferry.h");
    if std::env::var_os("FERRY_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/ferry.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != generated {
        let first = checked_in
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| checked_in.lines().count().min(generated.lines().count()));
        panic!(
            "crates/ferry-c/include/ferry.h is not what cbindgen generates from the crate now \
             (first difference at line {}: checked in {:?}, generated {:?}). Regenerate it with \
             `FERRY_BLESS=1 cargo test -p ferry-c --test header` and commit it.",
            first + 1,
            checked_in.lines().nth(first).unwrap_or("<end>"),
            generated.lines().nth(first).unwrap_or("<end>"),
        );
    }
}
