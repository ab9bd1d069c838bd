"""What the sweep scripts share (they run under this project's and upstream's tilelang alike)."""
import torch


def context_lost():
    """After a failed configuration: whether the CUDA context is unusable (an illegal
    address poisons it for the rest of the process), so later figures would be garbage."""
    try:
        torch.cuda.synchronize()
        torch.empty(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return False
    except Exception:  # the context is gone
        return True
