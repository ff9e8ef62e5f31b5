"""The Python reference of hpctrain's models, shared by the interop checks, the training tests and
the benchmark peers: torchvision's ResNets and AlexNet (with the cifar stem and other input
channel counts as hpctrain builds them), and the CIFAR ResNets of He et al. 2016 (sec. 4.2),
which torchvision does not have, defined here with hpctrain's parameter names.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


class CifarBlock(nn.Module):
    """He et al. 2016, sec. 4.2: two 3x3 convolutions, option A shortcut (stride-2 subsampling,
    zero-padded channels on both sides, no parameters)."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.stride = stride
        self.pad = planes - inplanes

    def shortcut(self, x):
        if self.stride == 1 and self.pad == 0:
            return x
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for 32x32 (or 28x28) images: 16/32/64 channels, n blocks per stage."""

    def __init__(self, depth, num_classes=10, in_channels=3, zero_init_residual=False):
        super().__init__()
        n = (depth - 2) // 6
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        inplanes = 16
        for i, (planes, stride) in enumerate([(16, 1), (32, 2), (64, 2)]):
            blocks = []
            for b in range(n):
                blocks.append(CifarBlock(inplanes, planes, stride if b == 0 else 1))
                inplanes = planes
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)
        # As torchvision's ResNet.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, CifarBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


CIFAR_DEPTHS = {"resnet20": 20, "resnet32": 32, "resnet44": 44, "resnet56": 56, "resnet110": 110}


def reference(arch, stem, in_channels, num_classes, zero_init):
    """The Python model C++ must equal, and whether it draws its initial weights as C++ does."""
    if arch in CIFAR_DEPTHS:
        return CifarResNet(CIFAR_DEPTHS[arch], num_classes, in_channels, zero_init), True
    if arch == "alexnet":
        model = torchvision.models.alexnet(num_classes=num_classes)
        if in_channels != 3:
            model.features[0] = nn.Conv2d(in_channels, 64, kernel_size=11, stride=4, padding=2)
            return model, False
        return model, True
    model = getattr(torchvision.models, arch)(
        num_classes=num_classes, zero_init_residual=zero_init)
    if stem == "imagenet" and in_channels == 3:
        return model, True
    if stem == "cifar":
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    else:
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return model, False


def build(arch, num_classes=1000, in_channels=3, stem="imagenet", zero_init_residual=False):
    """The model as hpctrain-worker builds it for [model] arch/stem/num_classes and the dataset's
    channel count (the CIFAR ResNets always have their own stem, AlexNet its own)."""
    return reference(arch, stem, in_channels, num_classes, zero_init_residual)[0]
