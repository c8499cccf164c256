"""Remote attestation of an EnclaveAI server (AI.ATTEST).

The evidence format is the server's (enclave/attest.go, format version 1):

    magic "EAIEVID\\0" | version 1 | kind (1 sgx, 2 simulated) | u32 BE length | report

The report is bound to the client's nonce and to the server's TLS public
key (DER SubjectPublicKeyInfo) by

    report_data = SHA-256("EnclaveAI attestation v1\\0" || SHA-256(nonce) || SHA-256(key)) || 32 zero bytes

A simulated report (149 bytes: "SIMULATED REPORT", the 64 bytes of report
data, zero identity fields, debug 1) proves nothing about the code and is
refused unless the policy allows it explicitly. An SGX report's signature
can only be checked by the platform's verification library, which Python
does not have: it is handed to `enclaveai-cli verify` (the Go verifier).
"""

import hashlib
import hmac
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from typing import Optional

MAGIC = b"EAIEVID\x00"
VERSION = 1
KIND_SGX = 1
KIND_SIMULATED = 2
HEADER = 14
LABEL = b"EnclaveAI attestation v1\x00"
SIM_MARKER = b"SIMULATED REPORT"
SIM_SIZE = 149


class AttestationError(Exception):
    """The server's evidence does not satisfy the policy: nothing was sent."""


class SimulatedAttestationWarning(UserWarning):
    """Simulated evidence was accepted because the policy allows it."""


@dataclass
class Policy:
    """What the client requires of the enclave behind the server.

    signer_id / unique_id: the expected MRSIGNER / MRENCLAVE, hex (`ego
    signerid`, `ego uniqueid`); one is required for SGX evidence.
    allow_simulated: accept simulated evidence, which proves nothing
    (development only; a warning is issued every time)."""
    signer_id: str = ""
    unique_id: str = ""
    product_id: int = 1
    min_svn: int = 1
    allow_debug: bool = False
    allow_simulated: bool = False


@dataclass
class Result:
    """What verified evidence says."""
    kind: str  # "sgx" or "simulated"
    unique_id: str = ""
    signer_id: str = ""
    product_id: int = 0
    security_version: int = 0
    debug: bool = False


def report_data(nonce: bytes, tls_key: bytes) -> bytes:
    """The 32 bytes that bind a report to nonce and the TLS key (DER)."""
    h = hashlib.sha256(LABEL)
    h.update(hashlib.sha256(nonce).digest())
    h.update(hashlib.sha256(tls_key).digest())
    return h.digest()


RECEIPT_LABEL = b"EnclaveAI receipt key v1\x00"


def receipt_key_data(receipt_key: bytes) -> bytes:
    """The second 32 bytes of report data: the binding of the server's
    receipt-signing public key (DER), or zeros when it has none."""
    if not receipt_key:
        return bytes(32)
    return hashlib.sha256(RECEIPT_LABEL + receipt_key).digest()


def parse_evidence(evidence: bytes):
    """(kind, report) from evidence bytes; AttestationError if malformed."""
    if len(evidence) < HEADER or evidence[:8] != MAGIC:
        raise AttestationError("malformed attestation evidence: no evidence header")
    if evidence[8] != VERSION:
        raise AttestationError("malformed attestation evidence: version %d" % evidence[8])
    kind = evidence[9]
    if kind not in (KIND_SGX, KIND_SIMULATED):
        raise AttestationError("malformed attestation evidence: unknown kind %d" % kind)
    (n,) = struct.unpack(">I", evidence[10:14])
    if n != len(evidence) - HEADER:
        raise AttestationError("malformed attestation evidence: report length %d in %d bytes" % (n, len(evidence)))
    return kind, bytes(evidence[HEADER:])


def verify(evidence: bytes, nonce: bytes, tls_key: bytes, policy: Policy, cli: Optional[str] = None,
           receipt_key: bytes = b"") -> Result:
    """Checks evidence against nonce, tls_key, the receipt key the server
    reported (AI.ATTEST receipt_public_key) and policy; raises
    AttestationError when it fails."""
    kind, report = parse_evidence(evidence)
    want = report_data(nonce, tls_key) + receipt_key_data(receipt_key)
    if kind == KIND_SIMULATED:
        if not policy.allow_simulated:
            raise AttestationError(
                "the server offers SIMULATED attestation evidence, which proves nothing about the code it runs; "
                "refused (pass attest=Policy(allow_simulated=True) for development only)")
        if (len(report) != SIM_SIZE or report[:16] != SIM_MARKER or any(report[80:148])
                or report[148] != 1):
            raise AttestationError("malformed attestation evidence: bad simulated report")
        if not hmac.compare_digest(report[16:80], want):
            raise AttestationError("report data does not match the nonce, TLS key and receipt key")
        msg = ("SIMULATED attestation accepted (allow_simulated=True): the server is NOT proven to run "
               "in an enclave; never send real models or data to it")
        warnings.warn(msg, SimulatedAttestationWarning, stacklevel=3)
        print("enclaveai: WARNING: " + msg, file=sys.stderr)
        return Result(kind="simulated", unique_id="00" * 32, signer_id="00" * 32, debug=True)
    return _verify_sgx(evidence, nonce, tls_key, receipt_key, policy, cli)


def find_cli() -> Optional[str]:
    """enclaveai-cli: $ENCLAVEAI_CLI, else on PATH."""
    return os.environ.get("ENCLAVEAI_CLI") or shutil.which("enclaveai-cli")


def _verify_sgx(evidence, nonce, tls_key, receipt_key, policy, cli):
    if not policy.signer_id and not policy.unique_id:
        raise AttestationError("the policy names neither a signer id nor a unique id")
    cli = cli or find_cli()
    if not cli:
        raise AttestationError("SGX evidence is verified by enclaveai-cli: put it on PATH or set ENCLAVEAI_CLI")
    with tempfile.NamedTemporaryFile() as f:
        f.write(evidence)
        f.flush()
        args = [cli, "verify", "-evidence", f.name, "-nonce", nonce.hex(), "-tls-key", tls_key.hex(),
                "-receipt-key", receipt_key.hex(),
                "-signer", policy.signer_id, "-unique", policy.unique_id,
                "-product-id", str(policy.product_id), "-min-svn", str(policy.min_svn)]
        if policy.allow_debug:
            args.append("-allow-debug")
        p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AttestationError((p.stdout + p.stderr).strip() or "enclaveai-cli verify failed")
    fields = dict(line.split(":", 1) for line in p.stdout.splitlines() if ":" in line)
    return Result(kind="sgx", unique_id=fields.get("unique id", "").strip(),
                  signer_id=fields.get("signer id", "").strip())


def spki_from_cert(der: bytes) -> bytes:
    """The SubjectPublicKeyInfo (DER) of an X.509 certificate (DER)."""
    def tlv(b, i):
        tag = b[i]
        n = b[i + 1]
        j = i + 2
        if n & 0x80:
            k = n & 0x7F
            n = int.from_bytes(b[j:j + k], "big")
            j += k
        return tag, j, j + n  # tag, start of value, end

    _, cstart, _ = tlv(der, 0)           # Certificate
    _, tstart, tend = tlv(der, cstart)   # TBSCertificate
    i = tstart
    tag, _, end = tlv(der, i)
    if tag == 0xA0:                      # [0] version
        i = end
    for _ in range(5):                   # serial, signature, issuer, validity, subject
        _, _, i = tlv(der, i)
    _, _, end = tlv(der, i)
    if end > tend:
        raise AttestationError("cannot read the server certificate's public key")
    return bytes(der[i:end])
