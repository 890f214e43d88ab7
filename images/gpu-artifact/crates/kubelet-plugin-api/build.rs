//! Compiles our kubelet protos with the pure-Rust `protox` compiler, so a fresh machine needs only
//! cargo (no system `protoc`), then generates prost messages and tonic clients and servers.

const PROTOS: [&str; 6] = [
    "proto/pluginregistration/v1/api.proto",
    "proto/dra/v1/api.proto",
    "proto/dra/v1beta1/api.proto",
    "proto/dra-health/v1alpha1/api.proto",
    "proto/dra-health/v1beta1/api.proto",
    "proto/dra-health/v1/api.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(PROTOS, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
