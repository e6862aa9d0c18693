#!/usr/bin/env python3
"""A model carrying TFLite Metadata and an appended labels file, written by Google's own populator.

Writes Tests/Fixtures/metadata/with_metadata.tflite: the float CONV_2D op fixture with a
ModelMetadata flatbuffer (name, version, description, input normalization mean 127.5 / std 127.5)
and labels.txt attached to the output as TENSOR_AXIS_LABELS, packed by
tflite_support.metadata.MetadataPopulator (which appends the zip archive).

Needs tflite-support 0.4.4 beside the reference requirements, in its own venv:
  python3 -m venv ~/.cache/spotter-fixtures-venv
  ~/.cache/spotter-fixtures-venv/bin/pip install -r ../shared/reference/requirements.txt
  ~/.cache/spotter-fixtures-venv/bin/pip install --no-deps tflite-support==0.4.4
  PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python ~/.cache/spotter-fixtures-venv/bin/python scripts/make_metadata_fixture.py
"""
import os
import shutil
import tempfile

import flatbuffers
from tflite_support import metadata as md
from tflite_support import metadata_schema_py_generated as schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "Tests", "Fixtures", "ops", "conv2d_float32_same_s2_relu6", "model.tflite")
OUT = os.path.join(ROOT, "Tests", "Fixtures", "metadata")
LABELS = ["background", "person", "bicycle", "car"]


def main():
    model = schema.ModelMetadataT()
    model.name = "Spotter metadata fixture"
    model.version = "v1.2"
    model.description = "A CONV_2D with normalization and labels."
    model.author = "Spotter"
    model.license = "Apache-2.0"

    normalization = schema.ProcessUnitT()
    normalization.optionsType = schema.ProcessUnitOptions.NormalizationOptions
    normalization.options = schema.NormalizationOptionsT()
    normalization.options.mean = [127.5]
    normalization.options.std = [127.5]
    image = schema.TensorMetadataT()
    image.name = "image"
    image.processUnits = [normalization]

    labels = schema.AssociatedFileT()
    labels.name = "labels.txt"
    labels.description = "Class names"
    labels.type = schema.AssociatedFileType.TENSOR_AXIS_LABELS
    features = schema.TensorMetadataT()
    features.name = "features"
    features.associatedFiles = [labels]

    subgraph = schema.SubGraphMetadataT()
    subgraph.inputTensorMetadata = [image]
    subgraph.outputTensorMetadata = [features]
    model.subgraphMetadata = [subgraph]

    builder = flatbuffers.Builder(0)
    builder.Finish(model.Pack(builder), md.MetadataPopulator.METADATA_FILE_IDENTIFIER)

    os.makedirs(OUT, exist_ok=True)
    target = os.path.join(OUT, "with_metadata.tflite")
    shutil.copy(SOURCE, target)
    with tempfile.TemporaryDirectory() as tmp:
        label_path = os.path.join(tmp, "labels.txt")
        with open(label_path, "w") as f:
            f.write("\n".join(LABELS) + "\n")
        populator = md.MetadataPopulator.with_model_file(target)
        populator.load_metadata_buffer(builder.Output())
        populator.load_associated_files([label_path])
        populator.populate()
    print("wrote", target, os.path.getsize(target), "bytes")


if __name__ == "__main__":
    main()
