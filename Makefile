# The two commands of the README, and their parts.
.PHONY: test test-fast release-check demo demo-stop dashboards-png build release deb e2e golden soak

test:            ## every check: fmt, clippy, unit/integration tests, promtool, e2e on both Patroni matrices
	scripts/test.sh

test-fast:       ## the same without the real-cluster scenarios
	scripts/test.sh --no-e2e

release-check:   ## cargo publish --dry-run: the packaged crate builds from its own files (a whole build; `make test` checks its file list)
	scripts/package-check.sh --dry-run

demo:            ## a real local Patroni + Raft cluster, the exporter, Prometheus and Alertmanager
	scripts/demo.sh up

demo-stop:       ## stop everything the demo started
	scripts/demo.sh down

dashboards-png:  ## docs/img/*.png: the dashboards drawn from a scripted incident on the real demo (~9 min, not in CI)
	scripts/dashboards-png.sh

build:
	cargo build --bin patroni-raft-exporter

release:
	cargo build --release --bin patroni-raft-exporter

deb:             ## the Debian package in target/debian/ (needs cargo-deb: scripts/install-deps.sh)
	scripts/build-deb.sh

soak:            ## an hour of churn (SOAK_MINUTES=60; >= 10) on both Patroni versions at once, one exporter each, checked and drawn (not in CI; root)
	cargo build --bin patroni-raft-exporter && cargo build --features testkit --bin fleet-sim
	scripts/soak.sh $${SOAK_VERSIONS:-3.3.8 4.1.5}

e2e: build       ## only the real-cluster scenarios (E2E_MATRICES="3.3.8 4.1.5")
	tests/e2e/scenarios.sh $${E2E_MATRICES:-3.3.8 4.1.5}

golden:          ## rewrite tests/golden/metrics.txt after an intended change of the output
	UPDATE_GOLDEN=1 cargo test --test it golden
