"""The models the peer knows, by cohort's names: tables, no torch.

The tables are read before torch is imported (to check --model and size the
thread pools first); the networks themselves are in nets.py (images) and
gpt2.py (tokens). Token models take --vocab V and --seq T (the context, and
the sequence length step trains on); image models take neither.
"""

from .common import die

MNIST = (1, 28, 28)  # C, H, W of one image
CIFAR = (3, 32, 32)
IMAGENET = (3, 224, 224)  # torchvision's architectures take any size >= 32

# name -> (input shape, class in nets.py, constructor arguments)
MODELS = {
    "mnist-small": (MNIST, "MnistSmall", ()),
    "mnist-large": (MNIST, "MnistLarge", ()),
    "lenet": (MNIST, "LeNet", ()),
    "cifar-vgg16": (CIFAR, "VGG16", ()),
    "cifar-resnet50": (CIFAR, "ResNet", ((3, 4, 6, 3),)),
    "cifar-resnet101": (CIFAR, "ResNet", ((3, 4, 23, 3),)),
    "cifar-resnet152": (CIFAR, "ResNet", ((3, 8, 36, 3),)),
    # torchvision.models' own (python3-torchvision), with its init.
    "resnet18": (IMAGENET, "torchvision_model", ("resnet18",)),
    "resnet50": (IMAGENET, "torchvision_model", ("resnet50",)),
    "resnet101": (IMAGENET, "torchvision_model", ("resnet101",)),
    "resnet152": (IMAGENET, "torchvision_model", ("resnet152",)),
    "vgg16": (IMAGENET, "torchvision_model", ("vgg16",)),
    "vgg16_bn": (IMAGENET, "torchvision_model", ("vgg16_bn",)),
}
TORCHVISION = [m for m, v in MODELS.items() if v[1] == "torchvision_model"]

# name -> (layers, width, heads, default vocab, default context); gpt2-tiny
# reads bytes.
TOKEN_MODELS = {
    "gpt2-tiny": (4, 64, 4, 256, 64),
    "gpt2": (12, 768, 12, 50257, 1024),
    "gpt2-medium": (24, 1024, 16, 50257, 1024),
    "gpt2-large": (36, 1280, 20, 50257, 1024),
}


def check_model(name):
    if name not in MODELS and name not in TOKEN_MODELS:
        die("unknown model '%s' (known: %s)"
            % (name, ", ".join(list(MODELS) + list(TOKEN_MODELS))))


def is_token_model(name):
    return name in TOKEN_MODELS


def check_dims(args):
    """--vocab / --seq: token models only, positive; 0 (unset) is the default."""
    for flag in ("vocab", "seq"):
        v = getattr(args, flag, 0)
        if v and not is_token_model(args.model):
            die("--%s applies to token models (%s), not %s"
                % (flag, ", ".join(TOKEN_MODELS), args.model))
        if v < 0:
            die("--%s must be >= 1 (got %d)" % (flag, v))


def gpt2_config(name, vocab=0, seq=0):
    """(layers, width, heads, vocab, context), with --vocab / --seq if set."""
    layers, width, heads, v, t = TOKEN_MODELS[name]
    return layers, width, heads, vocab or v, seq or t


def input_shape(name, seq=0):
    """(C, H, W) of an image model; (T,) token ids of a token model."""
    if is_token_model(name):
        return (gpt2_config(name, seq=seq)[4],)
    return MODELS[name][0]


def gpt2_shapes(name, vocab=0, seq=0):
    """[(parameter name, shape)] in cohort's names and {out, in} layout."""
    layers, c, _, v, t = gpt2_config(name, vocab, seq)
    out = [("wte.weight", (v, c)), ("wpe.weight", (t, c))]
    for i in range(layers):
        p = "h.%d." % i
        out += [(p + "ln_1.weight", (c,)), (p + "ln_1.bias", (c,)),
                (p + "attn.c_attn.weight", (3 * c, c)), (p + "attn.c_attn.bias", (3 * c,)),
                (p + "attn.c_proj.weight", (c, c)), (p + "attn.c_proj.bias", (c,)),
                (p + "ln_2.weight", (c,)), (p + "ln_2.bias", (c,)),
                (p + "mlp.c_fc.weight", (4 * c, c)), (p + "mlp.c_fc.bias", (4 * c,)),
                (p + "mlp.c_proj.weight", (c, 4 * c)), (p + "mlp.c_proj.bias", (c,))]
    return out + [("ln_f.weight", (c,)), ("ln_f.bias", (c,))]


def build_model(name, vocab=0, seq=0, device=None):
    """A fresh nn.Module (seed the RNG first): PyTorch's default init for the
    image nets, GPT-2's for token models. device "meta": shapes only."""
    check_model(name)
    if is_token_model(name):
        from .gpt2 import GPT2
        return GPT2(*gpt2_config(name, vocab, seq), device=device)
    from . import nets
    _, cls, ctor_args = MODELS[name]
    return getattr(nets, cls)(*ctor_args)


def count_params(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
