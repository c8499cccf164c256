"""EnclaveAI's Python client: attested uploads and runs of ONNX models.

    import enclaveai
    c = enclaveai.Client("127.0.0.1", 6379, attest=enclaveai.Policy(allow_simulated=True))
    model_id, sha256 = c.upload_model("model.onnx")     # progress bar, streamed
    out = c.run_model(model_id, x)                       # numpy, torch or lists
    out.as_numpy()
    c.delete_model(model_id)
"""

from .attest import AttestationError, Policy, Result, SimulatedAttestationWarning
from .client import Client, Output, Outputs, connect

__version__ = "0.1.0"

__all__ = ["Client", "connect", "Output", "Outputs", "Policy", "Result", "AttestationError",
           "SimulatedAttestationWarning"]
