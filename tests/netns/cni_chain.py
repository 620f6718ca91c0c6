#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""cni_chain.py: run a CNI conflist the way a container runtime does (the CNI spec's "Execution
of Network Configuration Lists"), for the netns suites: no cnitool in Debian.

  cni_chain.py ADD|CHECK|DEL CONFLIST NETNS IFNAME CONTAINERID CACHE

ADD runs the plugins in order, each with the network's name and cniVersion and the previous
plugin's result as prevResult, prints the last result and stores it in CACHE (the runtime's
result cache). CHECK and DEL give each plugin the cached result as prevResult; DEL runs the
plugins in reverse order. A plugin's error result is printed on stdout and the exit code is 1;
its stderr goes to ours.
"""
import json
import os
import subprocess
import sys


def run(plugin, conf, cmd, netns, ifname, cid, prev):
    net = dict(plugin)
    net["name"] = conf["name"]
    net["cniVersion"] = conf["cniVersion"]
    if prev is not None:
        net["prevResult"] = prev
    env = dict(os.environ, CNI_COMMAND=cmd, CNI_CONTAINERID=cid, CNI_NETNS=netns,
               CNI_IFNAME=ifname, CNI_PATH=os.environ["CNI_PATH"])
    exe = None
    for d in os.environ["CNI_PATH"].split(":"):
        if os.access(os.path.join(d, plugin["type"]), os.X_OK):
            exe = os.path.join(d, plugin["type"])
            break
    if exe is None:
        print(json.dumps({"code": 7, "msg": "plugin not found", "details": plugin["type"]}))
        sys.exit(1)
    p = subprocess.run([exe], input=json.dumps(net).encode(), env=env, stdout=subprocess.PIPE,
                       timeout=60)
    out = p.stdout.decode()
    if p.returncode != 0:
        sys.stdout.write(out)
        sys.exit(1)
    return json.loads(out) if out.strip() else None


def main():
    cmd, conflist, netns, ifname, cid, cache = sys.argv[1:7]
    with open(conflist) as f:
        conf = json.load(f)
    plugins = conf["plugins"]
    if cmd == "ADD":
        prev = None
        for p in plugins:
            prev = run(p, conf, cmd, netns, ifname, cid, prev)
        with open(cache, "w") as f:
            json.dump(prev, f)
        print(json.dumps(prev))
        return
    prev = None
    if os.path.exists(cache):
        with open(cache) as f:
            prev = json.load(f)
    if cmd == "CHECK":
        for p in plugins:
            run(p, conf, cmd, netns, ifname, cid, prev)
        return
    if cmd == "DEL":
        for p in reversed(plugins):
            run(p, conf, cmd, netns, ifname, cid, prev)
        if os.path.exists(cache):
            os.unlink(cache)
        return
    sys.exit("cni_chain.py: unknown command " + cmd)


main()
