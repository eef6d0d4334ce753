// SPDX-License-Identifier: MIT
pragma solidity >=0.6.5 <0.9.0;

import "./Catalogue.sol";

// The part of the catalogue that needs immutables (solc 0.6.5 or later).

/// A mint behind an immutable address (a constant in deployed code).
contract ImmutableFarm is Base {
    address private immutable _minter;

    constructor(address minter) CTOR {
        _minter = minter;
    }

    function farm(address to, uint256 v) external {
        require(msg.sender == _minter, "no");
        _balances[to] += v;
        _totalSupply += v;
    }
}
