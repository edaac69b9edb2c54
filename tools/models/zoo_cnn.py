"""Hand-written classic CNNs (architectures from the original papers).

inception_v3  Szegedy et al. 2016, "Rethinking the Inception Architecture"
squeezenet1_0 / squeezenet1_1  Iandola et al. 2016
resnet50      He et al. 2016 (bottleneck, v1: stride in the first 1x1)
googlenet     Szegedy et al. 2015 (LRN in the stem, no BN, no aux heads)
mobilenet_v2  Sandler et al. 2018
densenet121   Huang et al. 2017
"""

from netbuilder import Net


def classifier(net, x, classes=1000, dropout=None, name="fc"):
    """GAP output (N,C,1,1) -> Flatten -> [Dropout] -> Gemm(logits)."""
    y = net.flatten(x, name="flatten")
    if dropout is not None:
        y = net.dropout(y, ratio=dropout, name="dropout")
    y = net.gemm(y, classes, name=name, out="logits")
    net.output(y)
    return y


# ===================================================================
# Inception-v3 (299x299)
# ===================================================================

def _cbr(net, x, cout, k, stride=1, pads=0, name="conv"):
    """Conv(no bias) -> BN -> Relu, all under scope `name`."""
    with net.scope(name):
        y = net.conv(x, cout, k, stride, pads, name="conv")
        y = net.bn(y, name="bn")
        return net.relu(y, name="relu")


def _double_3x3_branch(net, x, stride, pads):
    """The 35x35 blocks' 1x1 -> 3x3 -> 3x3 branch; the grid reduction's last
    3x3 has stride 2 and no padding."""
    with net.scope("branch3x3dbl"):
        y = _cbr(net, x, 64, 1, name="conv_1x1")
        y = _cbr(net, y, 96, 3, pads=1, name="conv_3x3a")
        return _cbr(net, y, 96, 3, stride=stride, pads=pads, name="conv_3x3b")


def _avgpool_branch(net, x, cout):
    """3x3 average pool (padding counted) -> 1x1, in blocks A, C and E."""
    with net.scope("branch_pool"):
        y = net.avgpool(x, 3, 1, 1, count_include_pad=True, name="avgpool")
        return _cbr(net, y, cout, 1, name="conv_1x1")


def _inception_a(net, x, pool_features):
    with net.scope("branch1x1"):
        b1 = _cbr(net, x, 64, 1, name="conv_1x1")
    with net.scope("branch5x5"):
        b5 = _cbr(net, x, 48, 1, name="conv_1x1")
        b5 = _cbr(net, b5, 64, 5, pads=2, name="conv_5x5")
    b3 = _double_3x3_branch(net, x, stride=1, pads=1)
    bp = _avgpool_branch(net, x, pool_features)
    return net.concat([b1, b5, b3, bp], name="concat")


def _inception_b(net, x):  # grid reduction 35 -> 17
    with net.scope("branch3x3"):
        b3 = _cbr(net, x, 384, 3, stride=2, name="conv_3x3")
    bd = _double_3x3_branch(net, x, stride=2, pads=0)
    with net.scope("branch_pool"):
        bp = net.maxpool(x, 3, 2, name="maxpool")
    return net.concat([b3, bd, bp], name="concat")


def _inception_c(net, x, c7):  # 17x17 with factorised 7x7
    with net.scope("branch1x1"):
        b1 = _cbr(net, x, 192, 1, name="conv_1x1")
    with net.scope("branch7x7"):
        b7 = _cbr(net, x, c7, 1, name="conv_1x1")
        b7 = _cbr(net, b7, c7, (1, 7), pads=(0, 3), name="conv_1x7")
        b7 = _cbr(net, b7, 192, (7, 1), pads=(3, 0), name="conv_7x1")
    with net.scope("branch7x7dbl"):
        bd = _cbr(net, x, c7, 1, name="conv_1x1")
        bd = _cbr(net, bd, c7, (7, 1), pads=(3, 0), name="conv_7x1a")
        bd = _cbr(net, bd, c7, (1, 7), pads=(0, 3), name="conv_1x7a")
        bd = _cbr(net, bd, c7, (7, 1), pads=(3, 0), name="conv_7x1b")
        bd = _cbr(net, bd, 192, (1, 7), pads=(0, 3), name="conv_1x7b")
    bp = _avgpool_branch(net, x, 192)
    return net.concat([b1, b7, bd, bp], name="concat")


def _inception_d(net, x):  # grid reduction 17 -> 8
    with net.scope("branch3x3"):
        b3 = _cbr(net, x, 192, 1, name="conv_1x1")
        b3 = _cbr(net, b3, 320, 3, stride=2, name="conv_3x3")
    with net.scope("branch7x7x3"):
        b7 = _cbr(net, x, 192, 1, name="conv_1x1")
        b7 = _cbr(net, b7, 192, (1, 7), pads=(0, 3), name="conv_1x7")
        b7 = _cbr(net, b7, 192, (7, 1), pads=(3, 0), name="conv_7x1")
        b7 = _cbr(net, b7, 192, 3, stride=2, name="conv_3x3")
    with net.scope("branch_pool"):
        bp = net.maxpool(x, 3, 2, name="maxpool")
    return net.concat([b3, b7, bp], name="concat")


def _inception_e(net, x):  # 8x8 with expanded 1x3 / 3x1 filter banks
    with net.scope("branch1x1"):
        b1 = _cbr(net, x, 320, 1, name="conv_1x1")
    with net.scope("branch3x3"):
        b3 = _cbr(net, x, 384, 1, name="conv_1x1")
        b3a = _cbr(net, b3, 384, (1, 3), pads=(0, 1), name="conv_1x3")
        b3b = _cbr(net, b3, 384, (3, 1), pads=(1, 0), name="conv_3x1")
        b3 = net.concat([b3a, b3b], name="concat")
    with net.scope("branch3x3dbl"):
        bd = _cbr(net, x, 448, 1, name="conv_1x1")
        bd = _cbr(net, bd, 384, 3, pads=1, name="conv_3x3")
        bda = _cbr(net, bd, 384, (1, 3), pads=(0, 1), name="conv_1x3")
        bdb = _cbr(net, bd, 384, (3, 1), pads=(1, 0), name="conv_3x1")
        bd = net.concat([bda, bdb], name="concat")
    bp = _avgpool_branch(net, x, 192)
    return net.concat([b1, b3, bd, bp], name="concat")


def inception_v3(batch=1, seed=0):
    net = Net("inception_v3", seed, batch, bn_eps=1e-3,
              doc="Inception-v3 (Szegedy et al. 2016), 299x299, random weights")
    x = net.input("input", 3, 299, 299)
    with net.scope("stem"):
        x = _cbr(net, x, 32, 3, stride=2, name="conv_1a_3x3")   # 149
        x = _cbr(net, x, 32, 3, name="conv_2a_3x3")             # 147
        x = _cbr(net, x, 64, 3, pads=1, name="conv_2b_3x3")     # 147
        x = net.maxpool(x, 3, 2, name="maxpool_3a")             # 73
        x = _cbr(net, x, 80, 1, name="conv_3b_1x1")             # 73
        x = _cbr(net, x, 192, 3, name="conv_4a_3x3")            # 71
        x = net.maxpool(x, 3, 2, name="maxpool_5a")             # 35
    for blk, pf in (("mixed_5b", 32), ("mixed_5c", 64), ("mixed_5d", 64)):
        with net.scope(blk):
            x = _inception_a(net, x, pf)
    with net.scope("mixed_6a"):
        x = _inception_b(net, x)
    for blk, c7 in (("mixed_6b", 128), ("mixed_6c", 160), ("mixed_6d", 160),
                    ("mixed_6e", 192)):
        with net.scope(blk):
            x = _inception_c(net, x, c7)
    with net.scope("mixed_7a"):
        x = _inception_d(net, x)
    for blk in ("mixed_7b", "mixed_7c"):
        with net.scope(blk):
            x = _inception_e(net, x)
    with net.scope("head"):
        x = net.gap(x, name="avgpool")
        classifier(net, x, dropout=0.5)
    return net


# ===================================================================
# SqueezeNet 1.0 / 1.1 (224x224)
# ===================================================================

def _fire(net, x, squeeze, e1, e3):
    s = net.relu(net.conv(x, squeeze, 1, bias=True, name="squeeze1x1"), name="squeeze1x1_relu")
    a = net.relu(net.conv(s, e1, 1, bias=True, name="expand1x1"), name="expand1x1_relu")
    b = net.relu(net.conv(s, e3, 3, pads=1, bias=True, name="expand3x3"), name="expand3x3_relu")
    return net.concat([a, b], name="concat")


def _squeezenet(version, batch, seed):
    name = "squeezenet1_0" if version == "1_0" else "squeezenet1_1"
    net = Net(name, seed, batch,
              doc="SqueezeNet %s (Iandola et al. 2016), 224x224, random weights"
              % version.replace("_", "."))
    x = net.input("input", 3, 224, 224)
    if version == "1_0":
        x = net.relu(net.conv(x, 96, 7, 2, bias=True, name="conv1"), name="conv1_relu")
        plan = ["pool", (16, 64, 64), (16, 64, 64), (32, 128, 128), "pool",
                (32, 128, 128), (48, 192, 192), (48, 192, 192), (64, 256, 256),
                "pool", (64, 256, 256)]
    else:
        x = net.relu(net.conv(x, 64, 3, 2, bias=True, name="conv1"), name="conv1_relu")
        plan = ["pool", (16, 64, 64), (16, 64, 64), "pool", (32, 128, 128),
                (32, 128, 128), "pool", (48, 192, 192), (48, 192, 192),
                (64, 256, 256), (64, 256, 256)]
    fire_id, pool_id = 2, 1
    for item in plan:
        if item == "pool":
            # Caffe pooling rounds up: ceil_mode=1
            x = net.maxpool(x, 3, 2, ceil_mode=True, name="maxpool%d" % pool_id)
            pool_id += 1
        else:
            with net.scope("fire%d" % fire_id):
                x = _fire(net, x, *item)
            fire_id += 1
    with net.scope("classifier"):
        x = net.dropout(x, name="dropout")
        x = net.conv(x, 1000, 1, bias=True, name="conv10")
        x = net.relu(x, name="conv10_relu")
        x = net.gap(x, name="avgpool")
        x = net.node("Flatten", [x.name], "flatten", (x.shape[0], 1000),
                     out="logits", axis=1)
        net.output(x)
    return net


def squeezenet1_0(batch=1, seed=0):
    return _squeezenet("1_0", batch, seed)


def squeezenet1_1(batch=1, seed=0):
    return _squeezenet("1_1", batch, seed)


# ===================================================================
# ResNet-50 (v1 bottleneck: stride on the first 1x1, as in the paper)
# ===================================================================

def resnet50(batch=1, seed=0):
    net = Net("resnet50", seed, batch,
              doc="ResNet-50 v1 (He et al. 2016), 224x224, random weights")
    x = net.input("input", 3, 224, 224)
    with net.scope("stem"):
        x = _cbr(net, x, 64, 7, 2, 3, name="conv1")
        x = net.maxpool(x, 3, 2, 1, name="maxpool")
    stages = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]
    for si, (width, blocks, stride) in enumerate(stages):
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            with net.scope("layer%d/block%d" % (si + 1, bi)):
                y = _cbr(net, x, width, 1, s, name="conv1")
                y = _cbr(net, y, width, 3, 1, 1, name="conv2")
                with net.scope("conv3"):
                    y = net.conv(y, width * 4, 1, name="conv")
                    # residual branches of trained ResNets end in a BN with
                    # small gamma; keeps activations from growing with depth
                    y = net.bn(y, name="bn", gamma_scale=0.3)
                if bi == 0:
                    with net.scope("downsample"):
                        sc = net.conv(x, width * 4, 1, s, name="conv")
                        sc = net.bn(sc, name="bn")
                else:
                    sc = x
                x = net.relu(net.add(y, sc, name="add"), name="relu")
    with net.scope("head"):
        x = net.gap(x, name="avgpool")
        classifier(net, x)
    return net


# ===================================================================
# GoogLeNet (Inception v1), Caffe-style: Conv+bias+Relu, LRN in the stem
# ===================================================================

def _cr(net, x, cout, k, stride=1, pads=0, name="conv"):
    y = net.conv(x, cout, k, stride, pads, bias=True, name=name)
    return net.relu(y, name=name + "_relu")


def _inception_v1(net, x, c1, c3r, c3, c5r, c5, cp):
    with net.scope("branch1x1"):
        b1 = _cr(net, x, c1, 1, name="conv_1x1")
    with net.scope("branch3x3"):
        b3 = _cr(net, x, c3r, 1, name="conv_reduce")
        b3 = _cr(net, b3, c3, 3, pads=1, name="conv_3x3")
    with net.scope("branch5x5"):
        b5 = _cr(net, x, c5r, 1, name="conv_reduce")
        b5 = _cr(net, b5, c5, 5, pads=2, name="conv_5x5")
    with net.scope("branch_pool"):
        bp = net.maxpool(x, 3, 1, 1, name="maxpool")
        bp = _cr(net, bp, cp, 1, name="pool_proj")
    return net.concat([b1, b3, b5, bp], name="concat")


def googlenet(batch=1, seed=0):
    net = Net("googlenet", seed, batch,
              doc="GoogLeNet (Szegedy et al. 2015), 224x224, random weights")
    x = net.input("input", 3, 224, 224)
    with net.scope("stem"):
        x = _cr(net, x, 64, 7, 2, 3, name="conv1_7x7_s2")                  # 112
        x = net.maxpool(x, 3, 2, ceil_mode=True, name="pool1_3x3_s2")       # 56
        x = net.lrn(x, 5, 1e-4, 0.75, 1.0, name="pool1_norm1")
        x = _cr(net, x, 64, 1, name="conv2_3x3_reduce")
        x = _cr(net, x, 192, 3, pads=1, name="conv2_3x3")
        x = net.lrn(x, 5, 1e-4, 0.75, 1.0, name="conv2_norm2")
        x = net.maxpool(x, 3, 2, ceil_mode=True, name="pool2_3x3_s2")       # 28
    cfg = [("inception_3a", (64, 96, 128, 16, 32, 32)),
           ("inception_3b", (128, 128, 192, 32, 96, 64)),
           "pool3_3x3_s2",
           ("inception_4a", (192, 96, 208, 16, 48, 64)),
           ("inception_4b", (160, 112, 224, 24, 64, 64)),
           ("inception_4c", (128, 128, 256, 24, 64, 64)),
           ("inception_4d", (112, 144, 288, 32, 64, 64)),
           ("inception_4e", (256, 160, 320, 32, 128, 128)),
           "pool4_3x3_s2",
           ("inception_5a", (256, 160, 320, 32, 128, 128)),
           ("inception_5b", (384, 192, 384, 48, 128, 128))]
    for item in cfg:
        if isinstance(item, str):
            x = net.maxpool(x, 3, 2, ceil_mode=True, name=item)
        else:
            with net.scope(item[0]):
                x = _inception_v1(net, x, *item[1])
    with net.scope("head"):
        x = net.avgpool(x, 7, 1, name="pool5_7x7_s1")
        classifier(net, x, dropout=0.4, name="loss3_classifier")
    return net


# ===================================================================
# MobileNet-V2 (1.0, 224x224)
# ===================================================================

def mobilenet_v2(batch=1, seed=0):
    net = Net("mobilenet_v2", seed, batch,
              doc="MobileNetV2 1.0 (Sandler et al. 2018), 224x224, random weights")
    x = net.input("input", 3, 224, 224)
    with net.scope("stem"):
        x = net.conv(x, 32, 3, 2, 1, name="conv")
        x = net.relu6(net.bn(x, name="bn"), name="relu6")
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    idx = 1
    for t, c, n, s in settings:
        for i in range(n):
            stride = s if i == 0 else 1
            with net.scope("block%d" % idx):
                cin = x.c
                y = x
                if t != 1:
                    with net.scope("expand"):
                        y = net.conv(y, cin * t, 1, name="conv")
                        y = net.relu6(net.bn(y, name="bn"), name="relu6")
                with net.scope("depthwise"):
                    y = net.conv(y, y.c, 3, stride, 1, group=y.c, name="conv")
                    y = net.relu6(net.bn(y, name="bn"), name="relu6")
                with net.scope("project"):
                    # linear bottleneck: no activation -> LeCun-scaled init
                    y = net.conv(y, c, 1, name="conv", gain=1.0)
                    residual = stride == 1 and cin == c
                    y = net.bn(y, name="bn", gamma_scale=0.5 if residual else 1.0)
                if residual:
                    y = net.add(x, y, name="add")
                x = y
            idx += 1
    with net.scope("head"):
        x = net.conv(x, 1280, 1, name="conv", gain=1.0)
        x = net.relu6(net.bn(x, name="bn"), name="relu6")
        x = net.gap(x, name="avgpool")
        classifier(net, x, dropout=0.2)
    return net


# ===================================================================
# DenseNet-121 (k=32, blocks 6-12-24-16, BN-Relu-Conv pre-activation)
# ===================================================================

def densenet121(batch=1, seed=0):
    net = Net("densenet121", seed, batch,
              doc="DenseNet-121 (Huang et al. 2017), 224x224, random weights")
    growth, bn_size = 32, 4
    x = net.input("input", 3, 224, 224)
    with net.scope("features/stem"):
        x = net.conv(x, 64, 7, 2, 3, name="conv0")
        x = net.relu(net.bn(x, name="norm0"), name="relu0")
        x = net.maxpool(x, 3, 2, 1, name="pool0")
    for bi, layers in enumerate((6, 12, 24, 16)):
        with net.scope("features/denseblock%d" % (bi + 1)):
            feats = [x]
            for li in range(layers):
                with net.scope("denselayer%d" % (li + 1)):
                    inp = feats[0] if len(feats) == 1 else net.concat(feats, name="concat")
                    y = net.relu(net.bn(inp, name="norm1"), name="relu1")
                    y = net.conv(y, bn_size * growth, 1, name="conv1")
                    y = net.relu(net.bn(y, name="norm2"), name="relu2")
                    y = net.conv(y, growth, 3, 1, 1, name="conv2")
                feats.append(y)
            x = net.concat(feats, name="concat")
        if bi != 3:
            with net.scope("features/transition%d" % (bi + 1)):
                x = net.relu(net.bn(x, name="norm"), name="relu")
                x = net.conv(x, x.c // 2, 1, name="conv")
                x = net.avgpool(x, 2, 2, name="pool")
    with net.scope("head"):
        x = net.relu(net.bn(x, name="norm5"), name="relu5")
        x = net.gap(x, name="avgpool")
        classifier(net, x)
    return net


# ===================================================================
# EfficientNet-B0 (MBConv with squeeze-excitation, SiLU)
# ===================================================================

def efficientnet_b0(batch=1, seed=0):
    """EfficientNet-B0 (Tan and Le 2019), 224x224, random weights. Every
    activation is SiLU, written as exporters write it (Sigmoid, then Mul);
    each inverted-residual block has a squeeze-excitation gate of a quarter
    of its input channels (global average pool, two 1x1 convs with bias,
    Sigmoid, a Mul broadcast over the spatial dims)."""
    net = Net("efficientnet_b0", seed, batch, bn_eps=1e-3,
              doc="EfficientNet-B0 (Tan and Le 2019), 224x224, random weights")
    x = net.input("input", 3, 224, 224)
    with net.scope("stem"):
        x = net.silu(net.bn(net.conv(x, 32, 3, 2, 1, name="conv"), name="bn"))
    # expansion, output channels, repeats, first stride, kernel
    stages = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
              (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]
    idx = 0
    for t, c, n, s, k in stages:
        for i in range(n):
            stride = s if i == 0 else 1
            with net.scope("block%d" % idx):
                cin = x.c
                y = x
                if t != 1:
                    with net.scope("expand"):
                        y = net.silu(net.bn(net.conv(y, cin * t, 1, name="conv"), name="bn"))
                with net.scope("depthwise"):
                    y = net.conv(y, y.c, k, stride, k // 2, group=y.c, name="conv")
                    y = net.silu(net.bn(y, name="bn"))
                with net.scope("se"):
                    s_ = net.gap(y, name="squeeze")
                    s_ = net.silu(net.conv(s_, max(1, cin // 4), 1, bias=True, name="reduce"))
                    s_ = net.sigmoid(net.conv(s_, y.c, 1, bias=True, name="expand", gain=1.0))
                    y = net.scale_channels(y, s_)
                with net.scope("project"):
                    residual = stride == 1 and cin == c
                    y = net.conv(y, c, 1, name="conv", gain=1.0)
                    y = net.bn(y, name="bn", gamma_scale=0.5 if residual else 1.0)
                if residual:
                    y = net.add(x, y, name="add")
                x = y
            idx += 1
    with net.scope("head"):
        x = net.silu(net.bn(net.conv(x, 1280, 1, name="conv"), name="bn"))
        x = net.gap(x, name="avgpool")
        classifier(net, x, dropout=0.2)
    return net
