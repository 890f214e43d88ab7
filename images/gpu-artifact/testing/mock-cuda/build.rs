//! The library's ELF soname is `libcuda.so.1`, as the driver's is, so `ldconfig` lists it under that name.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
}
