#!/usr/bin/env python3
"""A small YOLO with YOLO11's attention (C2PSA), exported as TFLite by TensorFlow's own converter:
the op patterns of a YOLO11 export, for a model file we may commit.

YOLO11n itself is not obtainable here (its weights come from GitHub, not PyPI), so this builds a
network of the same kind with seeded random weights: strided convolutions with SiLU down to 8x8,
a two-head attention block (query x key, softmax, value x attention) written with batched matrix
products (TFLite BATCH_MATMUL on two activations) and a one-head one written with 2-D products
(TFLite FULLY_CONNECTED whose weights are an activation), an upsampled second scale, and a
YOLOv8/11 output [1, 84, 320] (centre boxes relative to the input, 80 class scores). The class
biases start low so that a few candidates per picture score above 0.25, as a trained model's do.

Writes Tests/Fixtures/models/attention-yolo/:
  attention-yolo-int8.tflite    full-integer (int8 input and output), calibrated on the shared pictures
  attention-yolo-hybrid.tflite  dynamic-range ("hybrid"): float input and output, 8-bit weights

Run with a Python that has tensorflow-cpu (2.21 here): the other scripts' venv does not need it,
since the files are committed. Spotter's outputs are never used here.
"""
import glob
import os

import cv2
import numpy as np
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
OUT = os.path.join(ROOT, "Tests", "Fixtures", "models", "attention-yolo")
SIZE = 256
CLASSES = 80
# The class scores' starting bias: a few candidates per picture score above 0.25.
BIAS = -3.3


LAYERS = {}


def layer(name, make):
    """The layer of that name, made once (the forward function runs while tracing and calling)."""
    if name not in LAYERS:
        LAYERS[name] = make()
    return LAYERS[name]


def conv(x, filters, k=3, stride=1, act=True, name=None, bias=None):
    seed = sum(map(ord, name))
    c = layer(name, lambda: tf.keras.layers.Conv2D(filters, k, stride, padding="same", name=name,
                                                   kernel_initializer=tf.keras.initializers.HeNormal(seed=seed),
                                                   bias_initializer=bias or "zeros"))
    x = c(x)
    return tf.nn.silu(x) if act else x


def attention_batched(x, heads=2, key=32, value=64):
    """Ultralytics' Attention: qkv by a 1x1 convolution, (q^T k) * scale, softmax, v attn^T, plus a
    depthwise positional term, then a 1x1 projection; NHWC, heads as a batch dimension."""
    _, h, w, c = x.shape
    n = h * w
    qkv = conv(x, heads * (2 * key + value), 1, act=False, name="qkv")
    qkv = tf.reshape(qkv, [1, n, heads, 2 * key + value])
    qkv = tf.transpose(qkv, [0, 2, 1, 3])  # [1, heads, n, 2k + v]
    q, k, v = qkv[..., :key], qkv[..., key:2 * key], qkv[..., 2 * key:]
    attn = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) * (key ** -0.5), axis=-1)  # BATCH_MATMUL
    out = tf.matmul(attn, v)  # BATCH_MATMUL, [1, heads, n, v]
    out = tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [1, h, w, heads * value])
    v_map = tf.reshape(tf.transpose(v, [0, 2, 1, 3]), [1, h, w, heads * value])
    pe = layer("pe", lambda: tf.keras.layers.DepthwiseConv2D(3, padding="same", depthwise_initializer=tf.keras.initializers.HeNormal(seed=3)))(v_map)
    return conv(out + pe, c, 1, act=False, name="proj")


def attention_2d(x, key=32, value=64):
    """One head with 2-D products: q k^T and attn v as MatMul, which TFLite writes as
    FULLY_CONNECTED whose weights (k, v^T) are activations."""
    _, h, w, c = x.shape
    n = h * w
    qkv = tf.reshape(conv(x, 2 * key + value, 1, act=False, name="qkv2"), [n, 2 * key + value])
    q, k, v = qkv[:, :key], qkv[:, key:2 * key], qkv[:, 2 * key:]
    attn = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) * (key ** -0.5), axis=-1)  # [n, n]
    out = tf.matmul(attn, v)  # [n, value]
    return conv(tf.reshape(out, [1, h, w, value]), c, 1, act=False, name="proj2")


def head(x, stride, name):
    """Per cell: 4 box values and 80 class scores; boxes as centre and size relative to the input."""
    _, h, w, _ = x.shape
    box = conv(x, 4, 1, act=False, name=f"{name}_box")
    cls = conv(x, CLASSES, 1, act=False, name=f"{name}_cls", bias=tf.keras.initializers.Constant(BIAS))
    gy, gx = np.meshgrid(np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32), indexing="ij")
    grid = np.stack([gx, gy], -1)[None]  # [1, h, w, 2]
    xy = (tf.sigmoid(box[..., :2]) * 2 - 0.5 + grid) * stride / SIZE
    wh = tf.sigmoid(box[..., 2:]) * 4 * stride / SIZE
    out = tf.concat([xy, wh, tf.sigmoid(cls)], -1)  # [1, h, w, 84]
    return tf.reshape(out, [1, h * w, 4 + CLASSES])


def forward(inp):
    x = conv(inp, 16, 3, 2, name="c1")        # 128
    x = conv(x, 32, 3, 2, name="c2")          # 64
    x = conv(x, 64, 3, 2, name="c3")          # 32
    p4 = conv(x, 96, 3, 2, name="c4")         # 16
    p5 = conv(p4, 128, 3, 2, name="c5")       # 8
    p5 = p5 + attention_batched(p5)
    p5 = p5 + attention_2d(p5)
    up = tf.image.resize(p5, [16, 16], method="nearest")
    p4 = conv(tf.concat([up, p4], -1), 96, 3, name="c6")
    out = tf.concat([head(p4, 16, "p4"), head(p5, 32, "p5")], 1)  # [1, 320, 84]
    return tf.transpose(out, [0, 2, 1])  # [1, 84, 320]


def letterbox(path):
    rgb = cv2.cvtColor(cv2.imread(path, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    h, w = rgb.shape[:2]
    s = min(SIZE / w, SIZE / h)
    iw, ih = max(1, round(w * s)), max(1, round(h * s))
    canvas = np.full((SIZE, SIZE, 3), 114, np.uint8)
    ox, oy = (SIZE - iw) // 2, (SIZE - ih) // 2
    canvas[oy:oy + ih, ox:ox + iw] = cv2.resize(rgb, (iw, ih), interpolation=cv2.INTER_LINEAR)
    return canvas.astype(np.float32) / 255


def main():
    os.makedirs(OUT, exist_ok=True)
    tf.keras.utils.set_random_seed(11)
    forward(tf.zeros([1, SIZE, SIZE, 3]))  # makes the layers
    model = tf.function(forward, input_signature=[tf.TensorSpec([1, SIZE, SIZE, 3], tf.float32)])
    concrete = model.get_concrete_function()
    pictures = sorted(glob.glob(os.path.join(SHARED, "images", "*.png")))
    pictures += sorted(glob.glob(os.path.join(SHARED, "coco128", "train2017", "*.jpg")))[:40]

    def representative():
        for path in pictures:
            yield [letterbox(path)[None]]

    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    with open(os.path.join(OUT, "attention-yolo-int8.tflite"), "wb") as f:
        f.write(converter.convert())

    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no representative data: dynamic range
    with open(os.path.join(OUT, "attention-yolo-hybrid.tflite"), "wb") as f:
        f.write(converter.convert())
    for name in sorted(os.listdir(OUT)):
        print(name, os.path.getsize(os.path.join(OUT, name)), "bytes")


if __name__ == "__main__":
    main()
