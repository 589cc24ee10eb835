// Finds libappnorth through pkg-config (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig),
// without the pkg-config crate: the example uses no crates at all.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let output = Command::new("pkg-config")
        .args(["--libs", "appnorth"])
        .output()
        .expect("pkg-config is not installed");
    if !output.status.success() {
        panic!(
            "pkg-config cannot find appnorth: set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig ({})",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    for flag in String::from_utf8(output.stdout).unwrap().split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
            // Run from the build tree without LD_LIBRARY_PATH.
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
}
