"""The networks, with cohort's parameter names (state_dict keys) and
PyTorch's default init. The ResNets here use the CIFAR stem (3x3 conv, no
max-pool); the ImageNet architectures are torchvision's own
(torchvision_model).

Each net's units() lists cohort's top-level layers (src/nn/models/), each with
the ReLU cohort fuses into it, sharing the net's parameters: stages.py cuts
those where cohort's --stages cuts. Parameter-free layers are new modules each
time (Pipe drops a module that appears twice).
"""

import torch.nn as nn
import torch.nn.functional as F


def seq(*mods):
    return nn.Sequential(*mods)


def pool2():
    return nn.MaxPool2d(2)


class MnistSmall(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.fc1 = nn.Linear(6272, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):                           # B x 1 x 28 x 28
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # B x 32 x 14 x 14
        x = x.flatten(1)
        return self.fc2(F.relu(self.fc1(x)))

    def units(self):
        return [seq(self.conv1, nn.ReLU(), pool2()), nn.Flatten(),
                seq(self.fc1, nn.ReLU()), self.fc2]


class MnistLarge(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 128, 3)
        self.conv2 = nn.Conv2d(128, 256, 3)
        self.conv3 = nn.Conv2d(256, 512, 3)
        self.fc1 = nn.Linear(512, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 10)

    def forward(self, x):                           # B x 1 x 28 x 28
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # 128x13x13
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 256x5x5
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)  # 512x1x1
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)

    def units(self):
        return [seq(self.conv1, nn.ReLU(), pool2()),
                seq(self.conv2, nn.ReLU(), pool2()),
                seq(self.conv3, nn.ReLU(), pool2()), nn.Flatten(),
                seq(self.fc1, nn.ReLU()), seq(self.fc2, nn.ReLU()), self.fc3]


class LeNet(nn.Module):
    # The classic PyTorch MNIST example, minus the final log_softmax.
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.conv2_drop = nn.Dropout2d(0.5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):                           # B x 1 x 28 x 28
        x = F.relu(F.max_pool2d(self.conv1(x), 2))  # B x 10 x 12 x 12
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))  # B x 20 x 4 x 4
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, 0.5, training=self.training)
        return self.fc2(x)

    def units(self):
        return [seq(self.conv1, pool2(), nn.ReLU()), seq(self.conv2, nn.ReLU()),
                self.conv2_drop, pool2(), nn.Flatten(), seq(self.fc1, nn.ReLU()),
                nn.Dropout(0.5), self.fc2]


class VGG16(nn.Module):
    # CIFAR VGG16 with BN: channels per conv, "M" a 2x2 max-pool.
    CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
           512, 512, 512, "M", 512, 512, 512, "M"]

    def __init__(self):
        super().__init__()
        self.plan = []  # per CFG entry: the conv's number, or None for a pool
        cin, i = 3, 0
        for v in self.CFG:
            if v == "M":
                self.plan.append(None)
                continue
            i += 1
            setattr(self, "conv%d" % i, nn.Conv2d(cin, v, 3, padding=1))
            setattr(self, "bn%d" % i, nn.BatchNorm2d(v))
            self.plan.append(i)
            cin = v
        self.fc = nn.Linear(512, 10)

    def forward(self, x):                           # B x 3 x 32 x 32
        for i in self.plan:
            if i is None:
                x = F.max_pool2d(x, 2)
            else:
                conv = getattr(self, "conv%d" % i)
                bn = getattr(self, "bn%d" % i)
                x = F.relu(bn(conv(x)))
        return self.fc(x.flatten(1))                # B x 512 -> B x 10

    def units(self):
        units = []
        for i in self.plan:
            units += [pool2()] if i is None else [
                getattr(self, "conv%d" % i), seq(getattr(self, "bn%d" % i), nn.ReLU())]
        return units + [nn.Flatten(), self.fc]


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride):
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride,
                               padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                nn.BatchNorm2d(cout))
        else:
            self.downsample = None

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + idt)


class ResNet(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        cin = 64
        for li, (planes, n) in enumerate(zip((64, 128, 256, 512), blocks)):
            layer = []
            for b in range(n):
                stride = 2 if (li > 0 and b == 0) else 1
                layer.append(Bottleneck(cin, planes, stride))
                cin = planes * Bottleneck.expansion
            setattr(self, "layer%d" % (li + 1), nn.Sequential(*layer))
        self.fc = nn.Linear(2048, 10)

    def forward(self, x):                           # B x 3 x 32 x 32
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)                          # B x 256 x 32 x 32
        x = self.layer2(x)                          # B x 512 x 16 x 16
        x = self.layer3(x)                          # B x 1024 x 8 x 8
        x = self.layer4(x)                          # B x 2048 x 4 x 4
        x = F.adaptive_avg_pool2d(x, 1)
        return self.fc(x.flatten(1))

    def units(self):
        return [self.conv1, seq(self.bn1, nn.ReLU()), self.layer1, self.layer2,
                self.layer3, self.layer4, seq(nn.AdaptiveAvgPool2d(1), nn.Flatten()),
                self.fc]


def torchvision_model(name, num_classes=1000):
    """torchvision.models.<name>, randomly initialized as torchvision does."""
    import torchvision
    return getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
