"""Reference models that plan out of the box: their names, factories and published facts (no torch here).

The models themselves are in `srift.refmodels.nets` (plain torch.nn, built from the published
architectures); their structure profiles (per-layer FLOPs, bytes moved, memory per sample) are shipped in
`srift/refmodels/data/` and turned into estimated compute curves for every GPU of the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReferenceModel:
    """A shipped reference model: factories as `MODULE:NAME` strings and the facts its tests check."""

    name: str
    title: str
    model_factory: str
    input_factory: str
    parameters: int
    sample: str
    source: str
    public_table_column: str | None = None
    sharded: bool = False
    """Planned with sharded data parallelism in mind: its estimated profiles offer every batch whose
    activations fit the GPU (each strategy's memory is checked per fleet) and carry the model's block
    facts for activation checkpointing (`srift.refmodels.blocks`)."""


REFERENCE_MODELS: tuple[ReferenceModel, ...] = (
    ReferenceModel(
        name="resnet50",
        title="ResNet-50 v1.5 (ImageNet, 224×224)",
        model_factory="srift.refmodels.nets:resnet50",
        input_factory="srift.refmodels.nets:image_input",
        parameters=25_557_032,
        sample="one 3×224×224 image",
        source="He et al., Deep Residual Learning (CVPR 2016), Table 1; torchvision resnet50 (v1.5)",
        public_table_column="resnet50",
    ),
    ReferenceModel(
        name="bert-base",
        title="BERT-base, SQuAD fine-tuning (sequence 384)",
        model_factory="srift.refmodels.nets:bert_base",
        input_factory="srift.refmodels.nets:bert_input",
        parameters=108_893_186,
        sample="one 384-token question/context pair",
        source="Devlin et al., BERT (NAACL 2019), §3 BERT-base; DeepLearningExamples SQuAD fine-tuning",
        public_table_column="bert_base_squad",
    ),
    ReferenceModel(
        name="gpt2-small",
        title="GPT-2 small, 124 M (language modelling, 1,024 tokens)",
        model_factory="srift.refmodels.nets:gpt2_small",
        input_factory="srift.refmodels.nets:gpt2_input",
        parameters=124_439_808,
        sample="one sequence of 1,024 tokens",
        source="Radford et al., Language Models are Unsupervised Multitask Learners (2019), Table 2",
    ),
    ReferenceModel(
        name="vit-b16",
        title="ViT-B/16 (ImageNet, 224×224)",
        model_factory="srift.refmodels.nets:vit_b16",
        input_factory="srift.refmodels.nets:image_input",
        parameters=86_567_656,
        sample="one 3×224×224 image",
        source="Dosovitskiy et al., An Image is Worth 16x16 Words (ICLR 2021), Table 1; torchvision vit_b_16",
    ),
    ReferenceModel(
        name="llama-1b",
        title="Llama 3.2 1B (language modelling, 2,048 tokens)",
        model_factory="srift.refmodels.llama:llama_1b",
        input_factory="srift.refmodels.llama:llama_input",
        parameters=1_235_814_400,
        sample="one sequence of 2,048 tokens",
        source="meta-llama/Llama-3.2-1B config.json (hidden 2048, 16 layers, 32 heads, 8 KV heads, "
        "FFN 8192, vocabulary 128256, tied embeddings)",
        sharded=True,
    ),
    ReferenceModel(
        name="llama-8b",
        title="Llama 3.1 8B (language modelling, 2,048 tokens)",
        model_factory="srift.refmodels.llama:llama_8b",
        input_factory="srift.refmodels.llama:llama_input",
        parameters=8_030_261_248,
        sample="one sequence of 2,048 tokens",
        source="meta-llama/Llama-3.1-8B config.json (hidden 4096, 32 layers, 32 heads, 8 KV heads, "
        "FFN 14336, vocabulary 128256)",
        sharded=True,
    ),
    ReferenceModel(
        name="gpt2-xl",
        title="GPT-2 XL, 1.5 B (language modelling, 1,024 tokens)",
        model_factory="srift.refmodels.nets:gpt2_xl",
        input_factory="srift.refmodels.nets:gpt2_input",
        parameters=1_557_611_200,
        sample="one sequence of 1,024 tokens",
        source="Radford et al. 2019, Table 2; OpenAI's gpt2-xl hyper-parameters (48 layers, d 1600, "
        "25 heads)",
        sharded=True,
    ),
)


def reference_model(name: str) -> ReferenceModel:
    """The reference model called `name`; KeyError when there is none."""
    for model in REFERENCE_MODELS:
        if model.name == name:
            return model
    raise KeyError(name)
