import Inference
