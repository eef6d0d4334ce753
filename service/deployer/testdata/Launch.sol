// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

// The launches the deployer record is read from, for tests: a token whose
// constructor mints its supply (the Transfer from 0x0 that marks its
// creation); a token that sets its supply silently (no mint to find); a
// stand-in for a DEX pool and a DEX factory that creates one for a token
// deployed directly; a launchpad that creates a token and its pool in one
// call, as Clanker, Zora, Flaunch and Virtuals do; and a forwarder that
// calls the launchpad for its caller, as a front end's router would (the
// transaction's `to` is then not the launchpad). compile.js builds
// launch.json from this file.

// Token is a minimal ERC-20 that mints its supply to `to` in its
// constructor.
contract Token {
    event Transfer(address indexed from, address indexed to, uint256 value);

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;

    constructor(address to, uint256 supply) {
        totalSupply = supply;
        balanceOf[to] = supply;
        emit Transfer(address(0), to, supply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}

// SilentToken sets its supply without a Transfer event; mint, which
// anyone may call, emits one.
contract SilentToken {
    event Transfer(address indexed from, address indexed to, uint256 value);

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;

    constructor(address to, uint256 supply) {
        totalSupply = supply;
        balanceOf[to] = supply;
    }

    function mint(address to, uint256 value) external {
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }
}

// Pool stands for a DEX pool of a token: its creation is what a whale
// scan follows.
contract Pool {
    address public immutable token;

    constructor(address token_) {
        token = token_;
    }
}

// Pools creates a pool of a token on request, as a DEX factory does.
contract Pools {
    event Created(address indexed token, address pool);

    function create(address token) external returns (address pool) {
        pool = address(new Pool(token));
        emit Created(token, pool);
    }
}

// Launchpad creates a token, minted to itself, and its pool in one call.
contract Launchpad {
    event Launched(address indexed token, address indexed pool, address indexed caller);

    function launch(uint256 supply) public returns (address token, address pool) {
        token = address(new Token(address(this), supply));
        pool = address(new Pool(token));
        emit Launched(token, pool, msg.sender);
    }
}

// Forwarder launches through a launchpad for its caller.
contract Forwarder {
    function launch(Launchpad pad, uint256 supply) external returns (address, address) {
        return pad.launch(supply);
    }
}
