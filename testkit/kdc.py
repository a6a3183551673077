"""A real MIT Kerberos KDC (Debian's ``krb5-kdc``) in a temporary realm on loopback, for the GSSAPI
tests: a fresh database, principals with keytabs, and the ``krb5.conf`` the broker and the clients
read (``KRB5_CONFIG``; Java: ``-Djava.security.krb5.conf``)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from testkit.ports import free_port

REALM = "KCOORD.TEST"
KDB5_UTIL = shutil.which("kdb5_util") or "/usr/sbin/kdb5_util"
KRB5KDC = shutil.which("krb5kdc") or "/usr/sbin/krb5kdc"
KADMIN_LOCAL = shutil.which("kadmin.local") or "/usr/sbin/kadmin.local"


def available() -> bool:
    return all(os.path.exists(p) for p in (KDB5_UTIL, KRB5KDC, KADMIN_LOCAL))


class Kdc:
    def __init__(self, directory: Path, realm: str = REALM, clockskew_s: int | None = None) -> None:
        """``clockskew_s``: the skew every party reading this realm's krb5.conf allows (MIT's
        default is 5 minutes), also how long past its end a ticket is still accepted."""
        self.dir = directory
        self.realm = realm
        self.clockskew_s = clockskew_s
        self.port = free_port()
        self.krb5_conf = directory / "krb5.conf"
        self.kdc_conf = directory / "kdc.conf"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to find this realm (MIT's libraries)."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def start(self) -> Kdc:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {self.realm}\n"
            "  dns_lookup_kdc = false\n  dns_lookup_realm = false\n  rdns = false\n"
            "  udp_preference_limit = 1\n  ticket_lifetime = 1h\n  forwardable = true\n"
            + (f"  clockskew = {self.clockskew_s}\n" if self.clockskew_s is not None else "") +
            "[realms]\n"
            f"  {self.realm} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}\n"
            "[domain_realm]\n"
            f"  localhost = {self.realm}\n")
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_ports = {self.port}\n  kdc_tcp_ports = {self.port}\n"
            "[realms]\n"
            f"  {self.realm} = {{\n"
            f"    database_name = {self.dir / 'principal'}\n"
            f"    key_stash_file = {self.dir / 'stash'}\n"
            f"    acl_file = {self.dir / 'kadm5.acl'}\n"
            "    max_life = 1h\n    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            "  }\n")
        (self.dir / "kadm5.acl").write_text("")
        env = {**os.environ, **self.env}
        subprocess.run([KDB5_UTIL, "create", "-s", "-r", self.realm, "-P", "kcoord-test-master"], env=env,
                       check=True, capture_output=True, timeout=60)
        log = open(self.dir / "kdc.log", "ab")  # noqa: SIM115 (the KDC's output, for as long as it runs)
        self.proc = subprocess.Popen([KRB5KDC, "-n", "-r", self.realm], env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while not _listening(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"krb5kdc did not start: {(self.dir / 'kdc.log').read_text()[-2000:]}")
            time.sleep(0.05)
        return self

    def add_principal(self, name: str, max_life: str | None = None) -> Path:
        """Creates ``name@REALM`` with a random key (its tickets living at most ``max_life``, in
        kadmin's words: "5 seconds") and returns a keytab holding it."""
        keytab = self.dir / (name.replace("/", "_") + ".keytab")
        env = {**os.environ, **self.env}
        life = f'-maxlife "{max_life}" ' if max_life else ""
        for query in (f"addprinc -randkey {life}{name}@{self.realm}", f"ktadd -k {keytab} {name}@{self.realm}"):
            subprocess.run([KADMIN_LOCAL, "-r", self.realm, "-q", query], env=env, check=True, capture_output=True,
                           timeout=60)
        return keytab

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
