/*
Package enclave is EnclaveAI's view of the Intel SGX enclave it may run in,
through EGo (github.com/edgelesssys/ego): whether it runs in one (Mode), the
key that seals its snapshots (LoadSealKey), and remote attestation (Attest on
the server, Verify on the client).

# Modes

In SGX mode the process runs inside an EGo enclave: the seal key is derived
from the CPU and the enclave's identity, and Attest returns a report signed by
the platform. Everywhere else the package runs in simulation mode, so that the
server builds, runs and is tested on any machine: the seal key comes from a key
file or an environment variable, and Attest returns a report marked SIMULATED
that proves nothing and that Verify refuses unless its Policy allows it.
Simulation mode is never silent: LoadSealKey returns a warning for the caller
to log and show in INFO. Outside an enclave EGo's seal-key calls return an
all-zero key without an error; this package never uses it, and refuses an
all-zero key in every mode.

# Report data

Attest binds its report to the verifier's nonce and to the server's TLS
public key: the report's 64 bytes of report data are

	SHA-256("EnclaveAI attestation v1\x00" || SHA-256(nonce) || SHA-256(tlsPubKeyDER))

followed by 32 bytes that bind the key the server signs inference receipts
with (see ReceiptKeyData):

	SHA-256("EnclaveAI receipt key v1\x00" || receiptPubKeyDER)

or 32 zero bytes when the server has no receipt key (evidence made before
receipts existed). A client that checks it knows the
report was made for its own nonce, so it is fresh, and by the enclave holding
the private key of the TLS connection it is talking over. The label and this
layout are part of the protocol: never change them.

# Evidence format, version 1

Evidence travels as bytes (the reply of the server's attestation command):

	offset size field
	     0    8 magic "EAIEVID\x00"
	     8    1 format version: 1
	     9    1 kind: 1 = SGX (an EGo remote report), 2 = SIMULATED
	    10    4 n: report length, uint32 big-endian, at most 64 KiB
	    14    n report
	  14+n      end (nothing may follow)

A SIMULATED report is 149 bytes:

	offset size field
	     0   16 marker "SIMULATED REPORT"
	    16   64 report data
	    80   32 unique id (MRENCLAVE): zero
	   112   32 signer id (MRSIGNER): zero
	   144    2 product id: zero
	   146    2 security version: zero
	   148    1 debug: 1

These layouts are fixed for version 1 and must never change.

# Verification and the EGo libraries

Verifying an SGX report needs Intel's attestation collateral, which EGo reaches
in one of two ways. Inside an EGo enclave, ego/enclave.VerifyRemoteReport does
it through the enclave runtime; that is the default build. A client outside any
enclave needs ego/eclient, which links the Open Enclave host verification
library (liboehostverify, from an EGo installation) with cgo: build with
-tags enclaveai_eclient on a machine with EGo installed. Without either, Verify
still checks simulated evidence, and refuses SGX evidence with an error that
says why. Without cgo the package always runs in simulation mode.
*/
package enclave
