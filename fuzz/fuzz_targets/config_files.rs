//! The YAML files the exporter reads (`--config.file`, Patroni's YAML, `--web.config.file`),
//! on arbitrary bytes. They come from the operator, not the network, but a truncated or
//! corrupted file must give an error, not a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;
use patroni_raft_exporter::config::{ConfigFile, PatroniYaml};
use patroni_raft_exporter::web::WebConfigFile;

fuzz_target!(|data: &[u8]| {
    let _ = serde_yaml_ng_from::<ConfigFile>(data);
    if let Ok(yaml) = serde_yaml_ng_from::<PatroniYaml>(data) {
        let _ = yaml.rest_url();
        let _ = yaml.raft_nodes();
        let _ = yaml.client_identity();
    }
    let _ = serde_yaml_ng_from::<WebConfigFile>(data);
});

fn serde_yaml_ng_from<T: serde::de::DeserializeOwned>(data: &[u8]) -> Result<T, ()> {
    serde_yaml_ng::from_slice(data).map_err(|_| ())
}
