#!/usr/bin/env python3
"""Render Charmed PostgreSQL's patroni.yml.j2 for one member of an e2e cluster, as the charm does.

Run with the interpreter of $E2E_WORK/venv-charm (scripts/install-deps.sh): the template is read
from the installed library package postgresql-charms-single-kernel
(single_kernel_postgresql/templates/patroni.yml.j2, never copied into this repository) and
rendered with jinja2's `Template(source).render(**confs)`, the call the charm's
managers/config.py makes, with the machine (VM) substrate's variables it passes. Only what
describes our cluster is ours: the member's name and address, the partners, the watcher, the
directory of the peer TLS files (conf_path: peer_ca.pem, peer_cert.pem, peer_key.pem) and the
passwords; the rest is given neutral values (no backup, no LDAP, no TLS to PostgreSQL).

  render-charm-patroni.py --scope pg-test --member postgresql-0 --self-ip 127.0.0.11 \\
      --partners 127.0.0.12,127.0.0.13 [--watcher 127.0.0.14:2223] --conf-path DIR OUT

--partners are addresses without a port (the template appends :2222, as for the charm's peers);
--watcher is the stereo-mode watcher's Raft host:port, added to partner_addrs as it is. The
secrets come from the environment, never from the command line: CHARM_RAFT_PASSWORD (raft.password)
and CHARM_PATRONI_PASSWORD (restapi.authentication). OUT is written with mode 0600, as the charm
writes patroni.yml on a machine.
"""
from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata, resources

import jinja2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scope", required=True)
    ap.add_argument("--member", required=True, help="the Patroni member name (the unit name with - for /)")
    ap.add_argument("--self-ip", required=True)
    ap.add_argument("--partners", default="", help="the other members' addresses, comma-separated, no port")
    ap.add_argument("--watcher", default=None, help="a Raft witness host:port (stereo mode)")
    ap.add_argument("--conf-path", required=True, help="where peer_ca.pem, peer_cert.pem, peer_key.pem are")
    ap.add_argument("--pg-version", default="16")
    ap.add_argument("out")
    args = ap.parse_args()
    try:
        raft_password = os.environ["CHARM_RAFT_PASSWORD"]
        patroni_password = os.environ["CHARM_PATRONI_PASSWORD"]
    except KeyError as missing:
        sys.exit(f"render-charm-patroni.py: {missing} is not set")
    partners = [p for p in args.partners.split(",") if p]
    source = resources.files("single_kernel_postgresql.templates").joinpath("patroni.yml.j2").read_text()
    base = "/var/snap/charmed-postgresql"
    # the keys of managers/config.py's `confs` for the VM substrate, in its order
    confs = {
        "substrate": "vm",
        "connectivity": True,
        "enable_ldap": False,
        "enable_tls": False,
        "member_name": args.member,
        "superuser": "operator",
        "superuser_password": "unused-superuser-password",
        "rewind_user": "rewind",
        "rewind_password": "unused-rewind-password",
        "replication_password": "unused-replication-password",
        "enable_pgbackrest_archiving": False,
        "stanza": None,
        "restore_stanza": None,
        "restoring_backup": False,
        "backup_id": None,
        "pitr_target": None,
        "restore_timeline": None,
        "restore_to_latest": False,
        "is_creating_backup": False,
        "version": args.pg_version,
        "synchronous_node_count": 1,
        "maximum_lag_on_failover": 1048576,
        "pg_parameters": None,
        "pg_cron_database": "postgres",
        "primary_cluster_endpoint": None,
        "ldap_parameters": "",
        "patroni_password": patroni_password,
        "user_databases_map": {},
        "slots": {},
        "instance_password_encryption": "scram-sha-256",
        "extra_replication_endpoints": [],
        "conf_path": args.conf_path,
        "log_path": f"{base}/common/var/log/patroni",
        "postgresql_log_path": f"{base}/common/var/log/postgresql",
        "data_path": f"{base}/common/var/lib/postgresql",
        "wal_dir": f"{base}/common/data/logs",
        "partner_addrs": partners,
        "peers_ips": sorted(partners),
        "pgbackrest_configuration_file": f"--config={base}/current/etc/pgbackrest/pgbackrest.conf",
        "scope": args.scope,
        "self_ip": args.self_ip,
        "listen_ips": [args.self_ip],
        "raft_password": raft_password,
        "watcher": args.watcher,
        "watcher_addr": args.watcher.rsplit(":", 1)[0] if args.watcher else None,
        "pg_cron_available": False,
        "shared_preload_libraries": "timescaledb,pg_stat_statements",
    }
    rendered = jinja2.Template(source).render(**confs)
    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(rendered)
    print(f"rendered single_kernel_postgresql/templates/patroni.yml.j2 of postgresql-charms-single-kernel "
          f"{metadata.version('postgresql-charms-single-kernel')} (jinja2 {metadata.version('jinja2')}) "
          f"for {args.member} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
