//! The library's ELF soname is `libnvidia-ml.so.1`, as the real one's: `ldconfig` names its cache entry
//! and links after the soname, so a driver root holding this library looks like a real one.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
}
