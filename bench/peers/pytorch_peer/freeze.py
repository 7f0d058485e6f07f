"""Fine-tuning as PyTorch users do it, for `step --freeze`: the frozen
layers' parameters get requires_grad=False (so autograd computes no gradient
for them, nor any input gradient below the lowest trainable layer), the
optimizer takes the trainable parameters only, and the frozen layers run in
eval mode (batch-norm on its running statistics, as model.eval() on the
backbone does).

--freeze backbone freezes every layer but the classifier head (the last
layer with parameters: fc, classifier.6); --freeze NAME freezes the layer of
that dotted name and every layer before it, as cohort's --freeze does.
"""

from .common import die


def leaves(net):
    """[(dotted name, module)] of the layers without children, in order."""
    return [(n, m) for n, m in net.named_modules() if n and not list(m.children())]


def frozen_leaves(net, what):
    layers = leaves(net)
    if what == "backbone":
        with_params = [i for i, (_, m) in enumerate(layers) if list(m.parameters())]
        return layers[:with_params[-1]]
    under = [i for i, (n, _) in enumerate(layers) if n == what or n.startswith(what + ".")]
    if not under:
        die("--freeze: the model has no layer '%s'" % what)
    return layers[:under[-1] + 1]


def freeze(net, what):
    """Freezes `net` (in train mode) as --freeze `what` says; returns the
    parameters left to train."""
    if what != "none":
        for _, m in frozen_leaves(net, what):
            m.eval()
            for p in m.parameters():
                p.requires_grad = False
    trainable = [p for p in net.parameters() if p.requires_grad]
    if not trainable:
        die("--freeze %s leaves nothing to train" % what)
    return trainable
