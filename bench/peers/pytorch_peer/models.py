"""The models the peer knows, by cohort's names: one table, no torch.

The table is read before torch is imported (to check --model and size the
thread pools first); the networks themselves are in nets.py.
"""

from .common import die

MNIST = (1, 28, 28)  # C, H, W of one image
CIFAR = (3, 32, 32)

# name -> (input shape, class in nets.py, constructor arguments)
MODELS = {
    "mnist-small": (MNIST, "MnistSmall", ()),
    "mnist-large": (MNIST, "MnistLarge", ()),
    "lenet": (MNIST, "LeNet", ()),
    "vgg16": (CIFAR, "VGG16", ()),
    "resnet50": (CIFAR, "ResNet", ((3, 4, 6, 3),)),
    "resnet101": (CIFAR, "ResNet", ((3, 4, 23, 3),)),
    "resnet152": (CIFAR, "ResNet", ((3, 8, 36, 3),)),
}


def check_model(name):
    if name not in MODELS:
        die("unknown model '%s' (known: %s)" % (name, ", ".join(MODELS)))


def input_shape(name):
    return MODELS[name][0]


def build_model(name):
    """A fresh nn.Module with PyTorch's default init (seed the RNG first)."""
    from . import nets
    check_model(name)
    _, cls, ctor_args = MODELS[name]
    return getattr(nets, cls)(*ctor_args)


def count_params(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
