// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

interface IERC20 {
    function balanceOf(address who) external view returns (uint256);
    function transfer(address to, uint256 amount) external returns (bool);
}

/// @notice LPTimelock holds an ERC-20 (in the tests, a pair's LP tokens)
/// for a beneficiary until releaseTime, with OpenZeppelin TokenTimelock's
/// (v4) getters: token(), beneficiary(), releaseTime(), release().
contract LPTimelock {
    IERC20 public immutable token;
    address public immutable beneficiary;
    uint256 public immutable releaseTime;

    constructor(IERC20 token_, address beneficiary_, uint256 releaseTime_) {
        require(releaseTime_ > block.timestamp, "release time is before current time");
        token = token_;
        beneficiary = beneficiary_;
        releaseTime = releaseTime_;
    }

    /// @notice release sends everything held to the beneficiary, once the
    /// release time has come.
    function release() external {
        require(block.timestamp >= releaseTime, "current time is before release time");
        uint256 amount = token.balanceOf(address(this));
        require(amount > 0, "no tokens to release");
        require(token.transfer(beneficiary, amount), "transfer failed");
    }
}
