"""Mobile networks written the way torch.onnx.export (opset 17) writes them.

mobilenet_v3   MobileNetV3-Large (Howard et al. 2019), 224x224
shufflenet_v2  ShuffleNetV2 1.0x (Ma et al. 2018), 224x224
deeplabv3      DeepLabV3 (Chen et al. 2017) on a MobileNetV3-Large backbone at
               output stride 16, 21 classes, 224x224

They use ops outside netbuilder's opset-13 set: HardSwish (opset 14),
HardSigmoid, Split with a `split` input, Transpose and Resize.
"""

from netbuilder import ALLOWED_OPS, Net
from zoo_cnn import classifier

OPSET = 17

MOBILE_OPS = ALLOWED_OPS | frozenset("HardSwish HardSigmoid Split Transpose Resize".split())


class MNet(Net):
    allowed_ops = MOBILE_OPS
    opset = OPSET
    count_padding = True


def make_divisible(v, divisor=8):
    """Round a channel count to a multiple of 8, never down by more than
    10% (the MobileNet reference code's _make_divisible)."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


# ===================================================================
# MobileNetV3-Large
# ===================================================================
# The paper's Table 1: kernel, expansion size, output channels, SE,
# activation (RE = ReLU, HS = HardSwish), stride.
MBV3_LARGE = [
    (3, 16, 16, False, "RE", 1),
    (3, 64, 24, False, "RE", 2),
    (3, 72, 24, False, "RE", 1),
    (5, 72, 40, True, "RE", 2),
    (5, 120, 40, True, "RE", 1),
    (5, 120, 40, True, "RE", 1),
    (3, 240, 80, False, "HS", 2),
    (3, 200, 80, False, "HS", 1),
    (3, 184, 80, False, "HS", 1),
    (3, 184, 80, False, "HS", 1),
    (3, 480, 112, True, "HS", 1),
    (3, 672, 112, True, "HS", 1),
    (5, 672, 160, True, "HS", 2),
    (5, 960, 160, True, "HS", 1),
    (5, 960, 160, True, "HS", 1),
]


def _act(net, x, kind):
    return net.relu(x) if kind == "RE" else net.hardswish(x)


def _bneck(net, x, k, exp, cout, se, act, stride, dilation=1):
    """Inverted residual with an optional squeeze-excitation gate: expand
    1x1 (left out when exp equals the input width), depthwise kxk, SE
    (GAP, 1x1 + ReLU, 1x1 + HardSigmoid, Mul), linear 1x1 projection, and
    a residual Add when the stride is 1 and the widths match."""
    cin = x.c
    y = x
    if exp != cin:
        with net.scope("expand"):
            y = _act(net, net.bn(net.conv(y, exp, 1, name="conv"), name="bn"), act)
    with net.scope("depthwise"):
        y = net.conv(y, exp, k, stride, (k - 1) // 2 * dilation, group=exp,
                     dilation=dilation, name="conv")
        y = _act(net, net.bn(y, name="bn"), act)
    if se:
        with net.scope("se"):
            s = net.gap(y, name="avgpool")
            s = net.relu(net.conv(s, make_divisible(exp // 4), 1, bias=True, name="fc1"))
            s = net.hardsigmoid(net.conv(s, exp, 1, bias=True, name="fc2"))
            y = net.scale_channels(y, s)
    residual = stride == 1 and cin == cout
    with net.scope("project"):
        y = net.conv(y, cout, 1, name="conv", gain=1.0)
        y = net.bn(y, name="bn", gamma_scale=0.5 if residual else 1.0)
    if residual:
        y = net.add(x, y, name="add")
    return y


def _mbv3_features(net, x, dilate_last=False, reduced_tail=False):
    """Stem (3x3/2 conv, BN, HardSwish) and the 15 bneck blocks. With
    `dilate_last` the last stage keeps stride 1 and its depthwise convs
    use dilation 2 (output stride 16); `reduced_tail` halves the last
    stage's output and later expansion widths (160 -> 80, 960 -> 480), the
    paper's reduction for segmentation (torchvision's reduced_tail)."""
    with net.scope("features/stem"):
        x = net.hardswish(net.bn(net.conv(x, 16, 3, 2, 1, name="conv"), name="bn"))
    last_stage = max(i for i, r in enumerate(MBV3_LARGE) if r[5] == 2)
    for i, (k, exp, cout, se, act, stride) in enumerate(MBV3_LARGE):
        dil = 1
        if dilate_last and i >= last_stage:
            stride, dil = 1, 2
        if reduced_tail and i >= last_stage:
            cout //= 2
            exp = exp // 2 if i > last_stage else exp
        with net.scope("features/block%d" % (i + 1)):
            x = _bneck(net, x, k, exp, cout, se, act, stride, dil)
    return x


def mobilenet_v3(batch=1, seed=0):
    """MobileNetV3-Large 1.0 (Howard et al. 2019), 224x224, random weights.
    BN eps 1e-3. Head: 1x1 conv to 960, BN, HardSwish, GAP, then the
    1280-wide fully connected layer, HardSwish, dropout 0.2 and fc."""
    net = MNet("mobilenet_v3", seed, batch, bn_eps=1e-3,
               doc="MobileNetV3-Large (Howard et al. 2019), 224x224, random weights")
    x = net.input("input", 3, 224, 224)
    x = _mbv3_features(net, x)
    with net.scope("head"):
        x = net.hardswish(net.bn(net.conv(x, 960, 1, name="conv"), name="bn"))
        x = net.gap(x, name="avgpool")
        x = net.flatten(x, name="flatten")
        x = net.hardswish(net.gemm(x, 1280, name="fc1", gain=2.0), name="hardswish_fc1")
        x = net.dropout(x, ratio=0.2, name="dropout")
        y = net.gemm(x, 1000, name="fc", out="logits")
        net.output(y)
    return net


# ===================================================================
# ShuffleNetV2 1.0x
# ===================================================================

def _channel_shuffle(net, x, groups=2):
    """view(N, g, C/g, H, W), transpose(1, 2), view(N, -1, H, W)."""
    n, c, h, w = x.shape
    with net.scope("shuffle"):
        y = net.reshape(x, [n, groups, c // groups, h, w], name="reshape1")
        y = net.transpose(y, [0, 2, 1, 3, 4])
        return net.reshape(y, [n, -1, h, w], name="reshape2")


def _shuffle_unit(net, x, cout, stride):
    """ShuffleNetV2 unit. Stride 1: Split the channels in half, keep one
    half, run the other through 1x1-BN-ReLU, depthwise 3x3-BN, 1x1-BN-ReLU;
    stride 2: both branches see the whole input (the left one is depthwise
    3x3/2-BN, 1x1-BN-ReLU). Concat, then a channel shuffle of 2 groups."""
    bf = cout // 2

    def branch2(y):
        with net.scope("branch2"):
            y = net.conv_bn_relu(y, bf, 1, name="pw1")
            with net.scope("dw"):
                y = net.conv(y, y.c, 3, stride, 1, group=y.c, name="conv")
                y = net.bn(y, name="bn")
            return net.conv_bn_relu(y, bf, 1, name="pw2", gain=1.0)

    if stride == 1:
        x1, x2 = net.split(x, [x.c // 2, x.c // 2])
        y = net.concat([x1, branch2(x2)])
    else:
        with net.scope("branch1"):
            with net.scope("dw"):
                y1 = net.conv(x, x.c, 3, stride, 1, group=x.c, name="conv")
                y1 = net.bn(y1, name="bn")
            y1 = net.conv_bn_relu(y1, bf, 1, name="pw", gain=1.0)
        y = net.concat([y1, branch2(x)])
    return _channel_shuffle(net, y)


def shufflenet_v2(batch=1, seed=0):
    """ShuffleNetV2 1.0x (Ma et al. 2018), 224x224, random weights: conv1
    3x3/2 (24), max pool 3x3/2, stages of 4/8/4 units with 116/232/464
    channels (the first unit of each at stride 2), conv5 1x1 to 1024, GAP
    and fc."""
    net = MNet("shufflenet_v2", seed, batch,
               doc="ShuffleNetV2 1.0x (Ma et al. 2018), 224x224, random weights")
    x = net.input("input", 3, 224, 224)
    x = net.conv_bn_relu(x, 24, 3, 2, 1, name="conv1")
    x = net.maxpool(x, 3, 2, 1, name="maxpool")
    for si, (c, n) in enumerate(((116, 4), (232, 8), (464, 4))):
        for i in range(n):
            with net.scope("stage%d/unit%d" % (si + 2, i)):
                x = _shuffle_unit(net, x, c, 2 if i == 0 else 1)
    x = net.conv_bn_relu(x, 1024, 1, name="conv5")
    with net.scope("head"):
        x = net.gap(x, name="avgpool")
        classifier(net, x)
    return net


# ===================================================================
# DeepLabV3 on MobileNetV3-Large, output stride 16
# ===================================================================

def _cbr(net, x, cout, k, pads=0, dilation=1, name="conv"):
    with net.scope(name):
        y = net.conv(x, cout, k, 1, pads, dilation=dilation, name="conv")
        return net.relu(net.bn(y, name="bn", eps=1e-5))


def deeplabv3(batch=1, seed=0, classes=21, width=128, rates=(3, 6, 9)):
    """DeepLabV3 (Chen et al. 2017), 224x224, random weights. Backbone:
    MobileNetV3-Large's 15 bneck blocks with the last stage dilated and its
    widths halved (output stride 16: 80 channels at 14x14). ASPP of
    `width` channels: a 1x1 conv, three 3x3 atrous convs at `rates` (the
    paper's 6/12/18 halved for the 14x14 map, where rate 18 would leave
    only the centre tap) and image pooling (GAP, 1x1 conv, BN, ReLU,
    bilinear Resize back to 14x14), all Conv-BN-ReLU; Concat, 1x1
    projection, dropout 0.5, a 1x1 classifier with bias and a bilinear
    Resize (x16) to the input size."""
    net = MNet("deeplabv3", seed, batch, bn_eps=1e-3,
               doc="DeepLabV3 (Chen et al. 2017), MobileNetV3-Large backbone, "
                   "output stride 16, 224x224, random weights")
    x = net.input("input", 3, 224, 224)
    x = _mbv3_features(net, x, dilate_last=True, reduced_tail=True)
    n, _, h, w = x.shape
    with net.scope("aspp"):
        branches = [_cbr(net, x, width, 1, name="conv1x1")]
        for r in rates:
            branches.append(_cbr(net, x, width, 3, r, r, name="atrous%d" % r))
        with net.scope("pool"):
            p = net.gap(x, name="avgpool")
            p = _cbr(net, p, width, 1, name="conv")
            branches.append(net.resize(p, sizes=[n, width, h, w]))
        y = net.concat(branches)
        y = _cbr(net, y, width, 1, name="project")
        y = net.dropout(y, ratio=0.5)
    with net.scope("classifier"):
        y = net.conv(y, classes, 1, bias=True, name="conv", gain=2.0)
        y = net.resize(y, scales=[1.0, 1.0, 16.0, 16.0], out="out")
    net.output(y)
    return net
