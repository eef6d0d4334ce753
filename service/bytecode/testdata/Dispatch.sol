// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

// Test fixtures for service/bytecode (compiled by compile.js beside this
// file): a token-like contract with enough functions for solc to split its
// dispatcher into a binary search, a delegating forwarder with its own
// storage slot, and a factory whose runtime code embeds a child's creation
// code. Not deployed anywhere.

/// @notice 24 external functions: solc splits the dispatcher with GT/LT pivots.
contract Many {
    mapping(address => uint256) public balanceOf;
    mapping(address => bool) public blacklisted;
    mapping(address => mapping(address => uint256)) public allowance;
    address public owner;
    bool public paused;
    uint256 public totalSupply;
    uint256 public buyFee;
    uint256 public sellFee;
    uint256 public maxTx;

    constructor() {
        owner = msg.sender;
    }

    modifier onlyOwner() {
        require(msg.sender == owner, "owner");
        _;
    }

    function name() external pure returns (string memory) { return "Many"; }
    function symbol() external pure returns (string memory) { return "MANY"; }
    function decimals() external pure returns (uint8) { return 18; }
    function transfer(address to, uint256 v) external returns (bool) { _move(msg.sender, to, v); return true; }
    function approve(address s, uint256 v) external returns (bool) { allowance[msg.sender][s] = v; return true; }
    function transferFrom(address f, address to, uint256 v) external returns (bool) {
        allowance[f][msg.sender] -= v;
        _move(f, to, v);
        return true;
    }
    function mint(address to, uint256 v) external onlyOwner { totalSupply += v; balanceOf[to] += v; }
    function burn(uint256 v) external { balanceOf[msg.sender] -= v; totalSupply -= v; }
    function pause() external onlyOwner { paused = true; }
    function unpause() external onlyOwner { paused = false; }
    function blacklist(address who) external onlyOwner { blacklisted[who] = true; }
    function unblacklist(address who) external onlyOwner { blacklisted[who] = false; }
    function blockBots(address[] calldata bots) external onlyOwner {
        for (uint256 i; i < bots.length; i++) blacklisted[bots[i]] = true;
    }
    function setFees(uint256 b, uint256 s) external onlyOwner { buyFee = b; sellFee = s; }
    function setMaxTx(uint256 m) external onlyOwner { maxTx = m; }
    function renounceOwnership() external onlyOwner { owner = address(0); }
    function transferOwnership(address o) external onlyOwner { owner = o; }

    function _move(address f, address to, uint256 v) internal {
        require(!paused && !blacklisted[f], "blocked");
        require(maxTx == 0 || v <= maxTx, "max");
        balanceOf[f] -= v;
        balanceOf[to] += v;
    }
}

/// @notice Forwards every call to the address kept in a slot of its own
/// choosing (not a standard one).
contract CustomSlotProxy {
    bytes32 private constant SLOT = 0x78916641fae9c8549b3be1dd57881b7c135163c302d04808ab47c9b1c832d174; // keccak256("tollgate.test.proxy.target")

    constructor(address t) {
        assembly {
            sstore(SLOT, t)
        }
    }

    function target() external view returns (address t) {
        assembly {
            t := sload(SLOT)
        }
    }

    receive() external payable {}

    fallback() external payable {
        address t;
        assembly {
            t := sload(SLOT)
        }
        _delegate(t);
    }

    function _delegate(address t) internal {
        assembly {
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), t, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            switch ok
            case 0 { revert(0, returndatasize()) }
            default { return(0, returndatasize()) }
        }
    }
}

/// @notice Deploys Many: its runtime code carries Many's creation code.
contract ManyFactory {
    address[] public all;

    function create() external returns (address m) {
        m = address(new Many());
        all.push(m);
    }

    function count() external view returns (uint256) {
        return all.length;
    }
}
